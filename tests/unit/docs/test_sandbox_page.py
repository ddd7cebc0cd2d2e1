"""docs/sandbox.md against the kubelet: every pod annotation it reads is documented.

Covers: each ``sandbox.tidal.dev/*`` annotation the kubelet defines has a row
in the page's table, and the page names none the kubelet does not read.
"""

from __future__ import annotations

import re
from pathlib import Path

from loadtests.sandbox.cluster.controllers.kubelet import server_specs

PAGE = Path(__file__).resolve().parents[3] / "docs" / "sandbox.md"


def test_every_pod_annotation_is_documented() -> None:
    read = {value for name, value in vars(server_specs).items() if name.startswith("ANNOTATION_")}
    shown = set(re.findall(r"^\| `(sandbox\.tidal\.dev/[a-z-]+)` \|", PAGE.read_text(), re.M))
    assert shown == read
