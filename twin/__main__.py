"""``python -m twin``: the ``twin`` command (see ``twin.cli``)."""

from twin.cli import main

raise SystemExit(main())
