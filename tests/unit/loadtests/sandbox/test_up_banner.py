"""What ``tidal sandbox up --no-example`` prints: where to read about one's own manifests.

Covers: without the example model the banner points at docs/sandbox.md,
which exists (a user's model otherwise meets the fake servers unprepared).
"""

from __future__ import annotations

from pathlib import Path

from loadtests.sandbox.up import _describe

ROOT = Path(__file__).resolve().parents[4]


class _Stack:  # the parts of a SandboxStack that the banner reads
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.kubeconfig = directory / "kubeconfig"
        self.scaler_url = "http://127.9.0.2:8090"
        self.activator_admin_url = "http://127.9.0.3:9091"
        self.activator_url = "http://127.9.0.3:8080"


def test_no_example_banner_points_at_the_sandbox_page(tmp_path: Path) -> None:
    text = _describe(_Stack(tmp_path), None)  # type: ignore[arg-type]
    assert "docs/sandbox.md" in text
    assert (ROOT / "docs" / "sandbox.md").is_file()
