"""``python -m commsim``: the command line (see :mod:`commsim.cli`)."""

import sys

from commsim.cli import main

sys.exit(main())
