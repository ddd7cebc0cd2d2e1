"""Where a sandbox lives: the one ``--dir`` flag of every sandbox command and the demo.

Main decision: **one default everywhere**, ``/tmp/tidal-sandbox`` (the
README's), so ``tidal sandbox up`` and then ``tidal sandbox preempt`` or
``spot-capacity`` in another terminal find each other without a flag, and
``tidal demo`` keeps its logs and chart where a user looks for them. Two
sandboxes cannot share one directory (its lock file says which process holds
it), so a second one needs its own ``--dir``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["DEFAULT_DIR", "add_dir_flag"]

DEFAULT_DIR = Path("/tmp/tidal-sandbox")


def add_dir_flag(parser: argparse.ArgumentParser, what: str) -> None:
    """``--dir DIR``, defaulting to :data:`DEFAULT_DIR`; ``what`` says what it holds."""
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"{what} (default: {DEFAULT_DIR})",
    )
