"""``tidal simulate`` end to end, as a user runs it (a subprocess).

Covers:
- a short CSV trace with every policy: the last stdout line is one JSON
  object whose ``policies`` hold always-on, HPA, KEDA, Knative and Tidal
  entries with the documented keys, every request accounted for;
- ``--charts`` writes the Pareto and the replicas PNGs;
- the rows include knative-tidal-idle, the planner and the oracle; always-on
  and the oracle say whether they reach the 99 % goal;
- a JSONL trace in milliseconds with its own field names (nested ones, a
  prefix field) runs; ``--load-factor 0.5`` keeps about half the requests;
  ``--seeds 2`` reports the mean and each column's spread;
- ``--prefix-field`` lowers TTFT on a trace whose prompts share a prefix;
  ``--routing least-loaded,prefix`` runs each and reports the hit rate;
- the shipped ``code`` trace runs from any folder with nothing beside it;
- a trace read in the wrong unit warns and names the flag;
- a trace with a missing column exits 2 and names the column and the flag;
- ``--adapters 20`` compares per-adapter Deployments, pinned adapters and
  on-demand loading; without it ``--trace`` is required;
- a bad ``--spot-zones`` exits 2 and says what is allowed; so do
  ``--chart-policy`` without ``--charts``, an unwritable ``--charts`` folder
  and an ``--annotation`` of another prefix; the short form
  ``--annotation window=20s`` is Tidal's ``autoscaling.tidal.dev/window``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def simulate(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TIDAL_TRACES_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "scaler.cli", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=cwd,
    )


def last_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


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
        "--start",
        "zero",
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
    for name in ("knative-tidal-idle", "planner", "oracle"):
        assert name in names
    assert policies[0]["reaches_target"] in (True, False)
    oracle = next(p for p in policies if p["name"] == "oracle")
    assert oracle["reaches_target"] is True
    assert oracle["gpu_seconds"] <= min(
        p["gpu_seconds"] for p in policies if p["slo_attainment"] >= oracle["slo_attainment"]
    )
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


def test_a_bad_spot_zone_count_is_named() -> None:
    done = simulate("--trace", "synthetic:bursts", "--spot-zones", "0", "--json")
    assert done.returncode == 2
    assert "spot zones must be >= 1, got 0" in done.stderr


def test_jsonl_with_its_own_fields_thinned_over_two_seeds(tmp_path: Path) -> None:
    trace = tmp_path / "mine.jsonl"
    rows = [
        {"ts": 1000 + i * 250, "req": {"in": 3000, "out": 12}, "hash_ids": [1, 2, 3, 4, 100 + i]}
        for i in range(400)
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = last_json(
        simulate(
            "--trace",
            str(trace),
            "--time-field",
            "ts",
            "--time-unit",
            "ms",
            "--prompt-field",
            "req.in",
            "--output-field",
            "req.out",
            "--prefix-field",
            "hash_ids",
            "--load-factor",
            "0.5",
            "--seeds",
            "2",
            "--policies",
            "always-on,tidal,oracle",
            "--cold-start",
            "10s",
            "--json",
        )
    )
    assert data["seeds"] == [1, 2]
    for row in data["policies"]:
        assert 160 <= row["requests"] <= 240  # about half of 400, per seed
        lo, hi = row["spread"]["requests"]
        assert lo <= row["requests"] <= hi


def test_the_shipped_code_trace_runs_from_anywhere(tmp_path: Path) -> None:
    data = last_json(
        simulate(
            "--trace",
            "code",
            "--duration",
            "120s",
            "--policies",
            "always-on",
            "--json",
            cwd=tmp_path,
        )
    )
    assert data["policies"][0]["requests"] == 63  # the first two minutes of the hour


def test_a_trace_in_milliseconds_read_as_seconds_warns(tmp_path: Path) -> None:
    trace = tmp_path / "ms.csv"
    trace.write_text("t,p,o\n" + "".join(f"{i * 10_000},100,5\n" for i in range(400)))
    done = simulate(
        "--trace",
        str(trace),
        "--time-field",
        "t",
        "--prompt-field",
        "p",
        "--output-field",
        "o",
        "--duration",
        "30s",
        "--policies",
        "always-on",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert "46.2 days" in done.stderr and "--time-unit ms" in done.stderr


def test_cli_mistakes_are_named() -> None:
    base = ("--trace", "synthetic:bursts", "--synthetic-duration", "2m", "--json")
    cases = {
        ("--chart-policy", "tidal"): "give --charts",
        ("--charts", "/proc/x"): "--charts /proc/x: cannot write there",
        ("--annotation", "example.com/window=20s"): "autoscaling.tidal.dev/KEY=VALUE",
        ("--load-factor", "0"): "must be > 0",
        ("--seeds", "0"): "--seeds must be >= 1",
    }
    for extra, message in cases.items():
        done = simulate(*base, *extra)
        assert done.returncode == 2, (extra, done.stderr)
        assert message in done.stderr, (extra, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_short_annotation_is_tidals() -> None:
    base = ("--trace", "synthetic:bursts", "--synthetic-duration", "2m", "--json")
    wrong = simulate(*base, "--policies", "tidal", "--annotation", "window=abc")
    assert wrong.returncode == 2
    assert "autoscaling.tidal.dev/window" in wrong.stderr
    short = last_json(simulate(*base, "--policies", "tidal", "--annotation", "window=20s"))
    full = last_json(
        simulate(*base, "--policies", "tidal", "--annotation", "autoscaling.tidal.dev/window=20s")
    )
    assert short["policies"][0]["gpu_seconds"] == full["policies"][0]["gpu_seconds"]


def test_the_prefix_field_lowers_ttft_on_shared_prompts(tmp_path: Path) -> None:
    trace = tmp_path / "shared.jsonl"
    rows = [
        {"ts": i * 250, "in": 6000, "out": 4, "blocks": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100 + i]}
        for i in range(200)
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = (
        "--trace", str(trace), "--time-field", "ts", "--time-unit", "ms",
        "--prompt-field", "in", "--output-field", "out", "--policies", "always-on",
        "--max-replicas", "1", "--json",
    )  # fmt: skip
    plain = last_json(simulate(*common))["policies"][0]
    routed = last_json(
        simulate(*common, "--prefix-field", "blocks", "--routing", "least-loaded,prefix")
    )["policies"]
    cached = routed[0]
    assert cached["ttft_p50_s"] < plain["ttft_p50_s"] / 2
    assert cached["gpu_seconds_busy"] < plain["gpu_seconds_busy"]
    # --routing adds the routing and the hit rate (ten of eleven blocks) and nothing else.
    assert "routing" not in plain and "prefix_hit_rate" not in plain
    assert [r["routing"] for r in routed] == ["least-loaded", "prefix"]
    assert all(0.8 < r["prefix_hit_rate"] < 1 for r in routed)


def test_adapters_compare_three_ways_of_serving_them_and_trace_is_needed_otherwise() -> None:
    done = simulate(
        "--adapters", "20", "--adapter-rate", "4", "--adapter-duration", "12m", "--json"
    )
    rows = {row["mode"]: row for row in last_json(done)["adapters"]}
    assert set(rows) == {"per-adapter", "pinned", "tidal"}
    assert rows["tidal"]["loads"] > 0 and rows["per-adapter"]["loads"] == 0
    assert rows["tidal"]["gpu_hours"] < rows["per-adapter"]["gpu_hours"]
    missing = simulate("--json")
    assert missing.returncode == 2 and "--trace is required (or --adapters N)" in missing.stderr
