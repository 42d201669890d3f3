"""``python -m twin.cli``: the ``twin`` command."""

from twin.cli import main

raise SystemExit(main())
