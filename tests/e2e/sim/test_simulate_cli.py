"""``tidal simulate`` end to end, as a user runs it (a subprocess).

Covers:
- a short CSV trace with every policy: the last stdout line is one JSON
  object whose ``policies`` hold always-on, HPA, KEDA, Knative and Tidal
  entries with the documented keys, every request accounted for;
- ``--charts`` writes the Pareto and the replicas PNGs;
- a trace with a missing column exits 2 and names the column and the flag.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "scaler.cli", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=ROOT,
    )


def write_trace(path: Path) -> Path:
    # Two bursts of 40 requests, five minutes apart, relative offsets in ms.
    lines = ["t_ms,prompt,output"]
    for start in (2_000, 302_000):
        lines += [f"{start + i * 50},{800 + i},{20}" for i in range(40)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_json_scorecard_for_every_policy(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv")
    done = simulate(
        "--trace",
        str(trace),
        "--time-field",
        "t_ms",
        "--time-unit",
        "ms",
        "--prompt-field",
        "prompt",
        "--output-field",
        "output",
        "--cold-start",
        "20s",
        "--json",
        "--charts",
        str(tmp_path / "charts"),
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    policies = json.loads(last)["policies"]
    names = [p["name"] for p in policies]
    for word in ("always", "hpa", "keda", "knative", "tidal"):
        assert any(word in name for name in names), names
    for p in policies:
        for key in ("slo_attainment", "gpu_seconds", "cost", "cold_starts", "failed"):
            assert key in p
        assert p["requests"] == 80
        assert p["completed"] + p["failed"] == 80
        assert 0.0 <= p["slo_attainment"] <= 1.0
    tidal = next(p for p in policies if p["name"] == "tidal")
    # Default grace 5 minutes: the second burst finds Tidal still warm.
    assert tidal["cold_starts"] == 1
    charts = sorted(p.name for p in (tmp_path / "charts").iterdir())
    assert charts == ["pareto.png", "replicas-tidal.png"]


def test_a_missing_column_is_named_with_its_flag(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("when,ContextTokens,GeneratedTokens\n1,2,3\n")
    done = simulate("--trace", str(trace), "--json")
    assert done.returncode == 2
    assert "TIMESTAMP" in done.stderr
    assert "--time-field" in done.stderr
