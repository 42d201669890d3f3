"""Shipped scene files (format: ``README.md`` here), read with ``twin.scenes.load_scene``."""
