"""``python -m bench NAME [--param value ...]``, ``--list``, ``--cheap``: see :mod:`bench.cli`."""

import sys

from bench.cli import main

sys.exit(main())
