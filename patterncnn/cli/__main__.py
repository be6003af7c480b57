"""``python -m patterncnn.cli``: the same as the ``patterncnn`` command."""

import sys

from . import main

sys.exit(main())
