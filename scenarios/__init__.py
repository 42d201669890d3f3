"""The shipped regression scenarios (data: one TOML file each; ``docs/formats/scenario.md``)."""
