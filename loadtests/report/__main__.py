"""``python -m loadtests.report``: see :mod:`loadtests.report.cli`."""

import sys

from loadtests.report.cli import main

sys.exit(main())
