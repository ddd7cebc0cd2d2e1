"""``tidal demo --story spot --json`` end to end, in a subprocess.

Covers: the spot story runs to the end and exits 0; its stdout is one JSON
line; the model reached one on-demand and three spot replicas, spread over
both zones; one spot node was preempted under streaming load and no request
failed; on-demand was asked to cover within about one decision of the
notice, and went back to the baseline (one) with three spot replicas Ready
at the end; the scaler's Events SpotFallback and SpotRecovered were seen;
the cost line shows a saving; the story (stderr) names the steps.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.timeout(240)
def test_spot_story_preempts_under_load_and_fails_nothing(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "scaler", "demo", "--story", "spot", "--json",
         "--dir", str(tmp_path / "demo")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=210,
    )  # fmt: skip
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    (json_line,) = run.stdout.rstrip("\n").splitlines()
    figures = json.loads(json_line)
    assert figures["story"] == "spot"
    assert figures["failed"] == 0
    assert figures["requests"] == figures["succeeded"] > 50
    assert figures["preemptions"] == 1
    assert figures["preempted_node"].startswith("gpu-spot-")
    assert (figures["peak_spot"], figures["peak_on_demand"]) == (3, 2)
    assert (figures["final_spot"], figures["final_on_demand"]) == (3, 1)
    assert set(figures["spot_zones"]) == {"us-east-1a", "us-east-1b"}
    # The scaler decides on the notice itself (a tick is 1 s; loose for a loaded box).
    assert 0 <= figures["fallback_s"] < 3.0
    assert figures["fallback_s"] <= figures["cover_ready_s"] <= figures["recovered_s"]
    assert {"SpotFallback", "SpotRecovered"} <= set(figures["events"])
    assert figures["events"].index("SpotFallback") < figures["events"].index("SpotRecovered")
    assert figures["saving_dollars_per_hour"] > 0
    assert figures["dollars_per_hour"] > 0

    story = run.stderr
    for step in ("1/4 load", "2/4 notice", "3/4 recovery", "4/4 cost", "OK:"):
        assert step in story, story[-3000:]
    assert "\x1b" not in story and "\r" not in story
    assert (tmp_path / "demo" / "logs" / "tidal-activator.log").is_file()
