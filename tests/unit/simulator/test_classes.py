"""Priority classes and tenants in the simulator: the trace fields, the hold, TTFT per class.

Covers: a trace's class and tenant fields are read (names, integers), and a
bad class is an error naming the row and the allowed values; the simulated
activator releases held requests by class through a cold start (critical
first) and in turns across tenants; at ``max-buffered`` a newcomer sheds
the lowest class held; ``tidal simulate --class-field`` prints and writes
TTFT per class.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from simulator import cli
from simulator.classes import ttft_by_class
from simulator.traces import TraceError, TraceFormat, TraceRequest, parse_trace
from simulator.world import ColdStart, View, WorldConfig, run_world

FMT = TraceFormat(
    time_field="t", prompt_field="p", output_field="o", class_field="c", tenant_field="who"
)


def test_class_and_tenant_fields_are_read_and_a_bad_class_is_named() -> None:
    rows = ["t,p,o,c,who", "0,10,5,critical,a", "1,10,5,-3,b", "2,10,5,Standard,a"]
    got = parse_trace(rows, fmt=FMT, kind="csv")
    assert [(r.priority, r.tenant) for r in got] == [(1, "a"), (-3, "b"), (0, "a")]
    with pytest.raises(TraceError, match=r"<trace>:3: cannot read 'c' as a class.*'urgent'"):
        parse_trace([*rows[:2], "1,10,5,urgent,b"], fmt=FMT, kind="csv")


class _WakeOnce:
    """Wakes one replica on the first activation, then holds it."""

    name = "wake-once"
    initial = 0
    period_s = 1.0

    def tick(self, view: View, *, activation: bool) -> int | None:
        return 1 if activation else None


def _first_token_order(requests: list[TraceRequest], config: WorldConfig) -> list[int]:
    result = run_world(requests, _WakeOnce(), config)
    firsts = [(t, i) for i, t in enumerate(result.first_token_s) if t is not None]
    return [i for _, i in sorted(firsts)]


def test_critical_requests_held_through_a_cold_start_go_first() -> None:
    # Standard ones arrive first; one request at a time fits the replica.
    requests = [TraceRequest(0.1 * n, 100, 5, priority=0 if n < 4 else 1) for n in range(8)]
    config = WorldConfig(cold_start=ColdStart(10.0), container_concurrency=1)
    assert _first_token_order(requests, config) == [4, 5, 6, 7, 0, 1, 2, 3]


def test_tenants_take_turns_through_a_cold_start() -> None:
    requests = [TraceRequest(0.01 * n, 100, 5, tenant="batch") for n in range(6)]
    requests += [TraceRequest(0.1 + 0.01 * n, 100, 5, tenant="chat") for n in range(2)]
    config = WorldConfig(cold_start=ColdStart(10.0), container_concurrency=1)
    assert _first_token_order(requests, config) == [0, 6, 1, 7, 2, 3, 4, 5]


def test_a_full_buffer_sheds_the_lowest_class_held() -> None:
    requests = [
        TraceRequest(0.0, 100, 5, priority=-1),
        TraceRequest(0.1, 100, 5, priority=0),
        TraceRequest(0.2, 100, 5, priority=0),
        TraceRequest(0.3, 100, 5, priority=0),
    ]
    config = WorldConfig(cold_start=ColdStart(10.0), max_buffered=2)
    result = run_world(requests, _WakeOnce(), config)
    assert result.failed_reason == ("shed", None, None, "buffer-full")
    by_class = ttft_by_class(result)
    assert (by_class["sheddable"].failed, by_class["standard"].failed) == (1, 1)


def test_simulate_reports_ttft_by_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "classes.csv"
    lines = ["t,p,o,c"]
    lines += [f"{0.01 * n:.2f},6000,20,standard" for n in range(30)]
    lines += [f"{0.5 + 0.01 * n:.2f},6000,20,critical" for n in range(10)]
    trace.write_text("\n".join(lines) + "\n")
    argv = [
        "--trace", str(trace), "--time-field", "t", "--prompt-field", "p", "--output-field",
        "o", "--class-field", "c", "--timestamps", "relative", "--policies", "knative-kpa",
        "--cold-start", "20s", "--start", "zero",
    ]  # fmt: skip
    parser = argparse.ArgumentParser(prog="tidal simulate")
    cli.configure(parser)
    assert cli.run(parser.parse_args(argv)) == 0
    table = capsys.readouterr().out
    assert "TTFT by class" in table and "critical" in table and "standard" in table
    assert cli.run(parser.parse_args([*argv, "--json"])) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["ttft_by_class"]
    knative = got["knative-kpa"]
    assert knative["critical"]["requests"] == 10 and knative["standard"]["requests"] == 30
    # Held through the same cold start, the critical ones are prefilled first.
    assert knative["critical"]["ttft_p99_s"] < knative["standard"]["ttft_p50_s"]
