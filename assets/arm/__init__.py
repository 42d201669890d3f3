"""The twin arm: ``twin_arm.urdf`` and its documentation ``README.md`` (package data)."""
