"""``tidal demo --story inferencepool --json`` end to end, in a subprocess.

Covers: the story runs to the end and exits 0 with no problem; its last
line is JSON in which the first request was answered 200 after the wake
began within a second of it, every request under load was answered, more
than one replica was ready at the peak and none at the end; the scaler's
log is kept and no activator ran.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.timeout(240)
def test_the_pool_story_wakes_through_the_picker_scales_and_idles(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "scaler", "demo", "--story", "inferencepool", "--json",
         "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=230,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures["problems"] == []
    assert figures["first_status"] == 200 and figures["wake_s"] < 1.0
    assert figures["requests"] == figures["succeeded"] > 0
    assert figures["peak_ready"] > 1 and figures["final_replicas"] == 0
    assert "no activator in the path" in run.stderr
    logs = tmp_path / "logs"
    assert (logs / "tidal-scaler.log").exists()
    assert not (logs / "tidal-activator.log").exists()
