"""Shipped robot cells (layout: ``README.md`` here), read with ``twin.planning.cells``."""
