"""Commands the docs and ``tidal sandbox up``'s banner show, checked as text.

Covers: no kubectl command in README.md, docs/ or the banner watches several types at
once (``kubectl get deploy,pods -w``), which kubectl refuses
(tests/integration/apiserver/test_shown_commands.py shows it does).
"""

from __future__ import annotations

import re
from pathlib import Path

from loadtests.sandbox.up import try_commands

ROOT = Path(__file__).resolve().parents[3]
_MULTI_TYPE_WATCH = re.compile(r"kubectl\s+get\s+\S+,\S+[^\n]*\s(-w|--watch)\b")


class _Stack:  # the parts of a SandboxStack that try_commands reads
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.scaler_url = "http://127.9.0.2:8090"
        self.activator_admin_url = "http://127.9.0.3:9091"
        self.activator_url = "http://127.9.0.3:8080"


def _shown_texts(kubeconfig: Path) -> dict[str, str]:
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    texts = {p.name: p.read_text() for p in pages}
    banner = try_commands(_Stack(kubeconfig), None)  # type: ignore[arg-type]
    texts["sandbox banner"] = "\n".join(command for _, command in banner)
    return texts


def test_no_command_watches_several_types(tmp_path: Path) -> None:
    for name, text in _shown_texts(tmp_path / "kubeconfig").items():
        assert not _MULTI_TYPE_WATCH.search(text), f"{name}: kubectl watches one type at a time"
