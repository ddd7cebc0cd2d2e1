"""``tidal demo --json`` end to end, as ``make demo`` runs it (plus ``--json``).

Covers: the whole story runs to the end in a subprocess, well inside three
minutes, and exits 0; its stdout is one line, the JSON of README.md, "Watch it once", with
every figure present and consistent (no failed request, a cold start, more
than one replica ready at peak, none at the end, a request held at the
activator, a first TTFT about the cold start, the share of requests within
the 2 s TTFT objective), and the human story goes to
stderr (changed with issue 15: it used to share stdout with the JSON);
without a terminal that story has no cursor tricks (plain lines only) and
explains its two cold-start figures; the sandbox directory given with
``--dir`` holds the processes' logs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REQUIRED = (
    "requests",
    "succeeded",
    "failed",
    "cold_starts",
    "peak_replicas",
    "final_replicas",
    "ttft_p50_s",
    "ttft_p99_s",
    "max_buffered",
)


@pytest.mark.timeout(240)
def test_demo_json_shows_scale_from_zero_out_and_back(tmp_path: Path) -> None:
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "scaler", "demo", "--json", "--dir", str(tmp_path / "demo")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=210,
    )
    wall_s = time.monotonic() - started
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    assert wall_s < 180, f"the demo took {wall_s:.0f}s, more than three minutes"

    # stdout is the JSON alone, so `tidal demo --json | jq` works.
    (json_line,) = run.stdout.rstrip("\n").splitlines()
    figures = json.loads(json_line)
    assert all(key in figures for key in REQUIRED), figures
    assert figures["failed"] == 0
    assert figures["requests"] == figures["succeeded"] > 1
    assert figures["cold_starts"] >= 1
    assert figures["peak_replicas"] > 1
    assert figures["final_replicas"] == 0
    assert figures["max_buffered"] >= 1
    assert 0 < figures["ttft_p50_s"] <= figures["ttft_p99_s"]
    # The first request waited for the 4 s cold start.
    assert figures["first_ttft_s"] >= 4.0
    # Measured against the 2 s objective: that first request, at least, missed it.
    assert figures["slo_ttft_s"] == 2.0
    assert 0 < figures["slo_attainment"] < 1

    # Readable without a terminal: plain lines, no carriage returns or escapes.
    lines = run.stderr.splitlines()
    assert "\x1b" not in run.stderr and "\r" not in run.stderr
    assert any("2/4 wake" in line for line in lines)
    assert any(" wake " in line and "held 1" in line for line in lines), "never showed it held"
    assert any(line.startswith("OK:") for line in lines)
    assert any(line.startswith("SLO: TTFT within 2s (client clock)") for line in lines)
    assert any(line.startswith("The two cold-start figures") for line in lines)
    assert (tmp_path / "demo" / "logs" / "tidal-scaler.log").is_file()
