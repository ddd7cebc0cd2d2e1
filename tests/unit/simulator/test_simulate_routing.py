"""``tidal simulate --routing`` (simulator.cli), run in process.

Covers: an unknown routing is refused naming the allowed ones; without the
flag the JSON and the table carry no routing or hit-rate column, and an
explicit ``least-loaded`` scores the same runs; on the synthetic multi-turn
chat trace (``synthetic:chat``, prompt block ids of 16 tokens) prefix routing
raises the hit rate over least-loaded, needs no more replicas, and stays
under the oracle's (one infinitely large replica); ``prefix`` on a trace
without block ids is refused naming the flag that gives them; the hit rate
is vLLM's hits over queries summed over the replicas.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from simulator import cli
from simulator.scorecard import prefix_hit_rate
from simulator.world import ON_DEMAND, ReplicaLife, RunResult

CHAT = (
    "--trace", "synthetic:chat", "--synthetic-duration", "60s", "--synthetic-rate", "9000",
    "--cold-start", "10s", "--policies", "always-on,oracle",
)  # fmt: skip


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tidal simulate")
    cli.configure(parser)
    return parser.parse_args(argv)


def simulate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.run(parse(*argv))
    out, err = capsys.readouterr()
    return code, out, err


def policies(out: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(out.strip().splitlines()[-1])["policies"]
    return rows


def test_an_unknown_routing_is_refused_naming_the_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for bad in ("round-robin", "prefix,prefix", ""):
        with pytest.raises(SystemExit):
            parse("--trace", "code", "--routing", bad)
        assert "choose from least-loaded, prefix" in capsys.readouterr().err


def test_without_the_flag_no_column_is_added_and_least_loaded_is_the_same_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = (*CHAT, "--policies", "always-on", "--synthetic-duration", "20s")
    _, plain_json, _ = simulate(capsys, *base, "--json")
    _, routed_json, _ = simulate(capsys, *base, "--json", "--routing", "least-loaded")
    (plain,), (routed,) = policies(plain_json), policies(routed_json)
    assert "routing" not in plain and "prefix_hit_rate" not in plain
    assert routed["routing"] == "least-loaded" and 0 < routed["prefix_hit_rate"] < 1
    for key in ("name", "gpu_seconds", "ttft_p50_s", "ttft_p99_s", "slo_attainment"):
        assert routed[key] == plain[key]
    _, table, _ = simulate(capsys, *base)
    assert "routing" not in table.splitlines()[1] and " hit " not in table


def test_prefix_routing_raises_the_hit_rate_on_the_chat_trace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = simulate(capsys, *CHAT, "--routing", "least-loaded,prefix", "--json")
    assert code == 0
    rows = {(r["name"].rstrip("0123456789-"), r["routing"]): r for r in policies(out)}
    least, prefix = rows[("always-on", "least-loaded")], rows[("always-on", "prefix")]
    ideal = rows[("oracle", "prefix")]["prefix_hit_rate"]
    assert rows[("oracle", "least-loaded")]["prefix_hit_rate"] == ideal
    # The load needs several replicas, where least-loaded scatters the turns.
    assert int(least["name"].rsplit("-", 1)[1]) >= 2
    assert least["prefix_hit_rate"] + 0.1 < prefix["prefix_hit_rate"] <= ideal
    assert int(prefix["name"].rsplit("-", 1)[1]) <= int(least["name"].rsplit("-", 1)[1])
    _, table, _ = simulate(capsys, *CHAT, "--routing", "prefix", "--policies", "oracle")
    header = table.splitlines()[1].split()
    assert header[3:6] == ["routing", "hit", "TTFT"]


def test_prefix_routing_needs_block_ids(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = simulate(
        capsys, "--trace", "synthetic:bursts", "--synthetic-duration", "1m", "--routing", "prefix"
    )
    assert code == 2
    assert "--prefix-field" in err and "synthetic:chat" in err


def test_the_hit_rate_is_hits_over_queries_over_all_replicas() -> None:
    def result(*lives: ReplicaLife) -> RunResult:
        return RunResult("x", (), (), (), (), (), (), 0, lives, (), 1.0, 0)

    assert prefix_hit_rate(result()) is None
    two = result(
        ReplicaLife(ON_DEMAND, 0.0, 1.0, 0.5, cached_tokens=300, queried_tokens=400),
        ReplicaLife(ON_DEMAND, 0.0, 1.0, 0.5, cached_tokens=0, queried_tokens=600),
    )
    assert prefix_hit_rate(two) == pytest.approx(0.3)
