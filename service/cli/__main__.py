"""``python -m service.cli VERB ...``, the same as ``clir VERB ...``."""

import sys

from service.cli.core import main

sys.exit(main())
