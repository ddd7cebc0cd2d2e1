"""``python -m scaler`` is ``tidal``."""

import sys

from scaler.cli import main

sys.exit(main())
