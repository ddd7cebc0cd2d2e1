"""``tidal demo --story warm --json`` end to end, in a subprocess.

Covers: the story runs to the end and exits 0; its last line is JSON with
both requests answered 200, the wake from sleep under half the cold start
(on the client's clock), and the scaler's own wake duration present.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadtests.demo.warm_story import COLD_START_S

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.timeout(180)
def test_warm_story_shows_a_wake_beside_a_cold_start(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaler",
            "demo",
            "--story",
            "warm",
            "--json",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures["problems"] == []
    assert figures["cold_status"] == figures["warm_status"] == 200
    assert figures["cold_s"] >= COLD_START_S * 0.9
    assert figures["warm_s"] < figures["cold_s"] / 2
    assert 0 < figures["wake_s"] <= figures["warm_s"]
    assert (tmp_path / "logs" / "tidal-scaler.log").exists()
