"""``python -m patterncnn``: the command line, as the ``patterncnn`` script (:mod:`patterncnn.cli`)."""

from .cli import main

raise SystemExit(main())
