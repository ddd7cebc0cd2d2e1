"""``tidal demo --story lora --json`` end to end, in a subprocess: LoRA adapters in the sandbox.

Covers, through the activator over plain HTTP: ten adapters
listed with their parent; the first request for an adapter no replica has
loaded answered after one load (the fake's load time plus at most 100 ms of
Tidal's); the next ones with no load; ten adapters over four slots, twice,
at once, with no 404; every adapter unloaded from both replicas once idle
past the keep-alive; an undeclared adapter a 404.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadtests.demo.lora_story import ADAPTERS, LOAD_S

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.timeout(180)
def test_lora_story_loads_on_demand_and_unloads_when_idle(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaler",
            "demo",
            "--story",
            "lora",
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
    assert figures["listed"] == len(ADAPTERS)
    # The one-token request itself takes a few ms; Tidal's part is within 100 ms.
    assert LOAD_S <= figures["first_s"] <= LOAD_S + 0.1
    assert figures["next_s"] < 0.1
    assert figures["burst_statuses"] == [200] and figures["burst_404s"] == 0
    assert all(len(names) <= 2 for names in figures["loaded_during"].values())
    assert figures["loaded_after"] and not any(figures["loaded_after"].values())
    assert figures["undeclared_status"] == 404
