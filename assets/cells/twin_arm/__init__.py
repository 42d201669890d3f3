"""The shipped cell of the twin arm: ``cell.json`` (see ``../README.md``)."""
