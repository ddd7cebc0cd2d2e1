"""``tidal simulate``'s yardsticks on the command line (simulator.cli), run in process.

Covers: ``--json`` carries ``fleets`` (every size to ``--max-replicas``) and a
``reactive`` row, and the table prints the frontier; ``--cold-start`` with a
list runs every policy once per value, each row and frontier point carrying
its value, and a repeated value is refused; ``--start zero`` makes the first
cold start cost requests, ``--start warm`` (the default) none, and the table
says so on its own line; an unknown ``--start`` or policy is refused naming
the choices.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from simulator import cli

SHORT = (
    "--trace", "synthetic:bursts", "--synthetic-duration", "2m", "--synthetic-rate", "600",
    "--max-replicas", "4", "--cold-start", "10s",
)  # fmt: skip


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tidal simulate")
    cli.configure(parser)
    return parser.parse_args(argv)


def simulate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, dict[str, Any]]:
    assert cli.run(parse(*argv)) == 0
    out = capsys.readouterr().out
    document: dict[str, Any] = json.loads(out.strip().splitlines()[-1]) if "--json" in argv else {}
    return out, document


def test_json_carries_the_frontier_and_the_reactive_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, doc = simulate(capsys, *SHORT, "--policies", "always-on,reactive,oracle", "--json")
    assert [p["replicas"] for p in doc["fleets"]] == [1, 2, 3, 4]
    assert {"slo_attainment", "gpu_seconds", "cost", "simulated"} <= set(doc["fleets"][0])
    assert [row["name"] for row in doc["policies"]][1:] == ["reactive", "oracle"]
    out, _ = simulate(capsys, *SHORT, "--policies", "always-on")
    assert "fixed fleets (replicas: SLO, GPU-h): 1: " in out


def test_each_autoscaler_row_carries_its_frontier_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = (*SHORT, "--policies", "always-on,reactive,oracle", "--cold-start", "20s,5s")
    _, doc = simulate(capsys, *flags, "--json")
    by_name = {(row["name"], row["cold_start_s"]): row for row in doc["policies"]}
    for cold in (20.0, 5.0):
        verdict = by_name[("reactive", cold)]["frontier"]
        fleets = [p for p in doc["fleets"] if p["cold_start_s"] == cold]
        reactive = by_name[("reactive", cold)]
        reaching = [p for p in fleets if p["slo_attainment"] >= reactive["slo_attainment"]]
        if reaching:
            smallest = min(reaching, key=lambda p: p["gpu_seconds"])
            assert verdict["fleet_at_attainment"]["name"] == f"fleet {smallest['replicas']}"
        assert "frontier" not in by_name[("oracle", cold)]
    assert not any("frontier" in row for row in doc["policies"] if row["name"].startswith("always"))
    out, _ = simulate(capsys, *flags)
    header, *rows = out.splitlines()[1:]
    assert header.split()[-1] == "frontier"
    reactive_line = next(line for line in rows if line.startswith("reactive"))
    assert reactive_line.split()[-1] in ("ok", "dominated")
    assert "frontier: GPU-h over the smallest fixed fleet" in out


def test_a_cold_start_list_runs_every_policy_once_per_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = (*SHORT, "--policies", "always-on,reactive", "--cold-start", "20s,5s")
    _, doc = simulate(capsys, *flags, "--json")
    rows = [(row["name"].split("-")[0], row["cold_start_s"]) for row in doc["policies"]]
    assert rows == [("always", 20.0), ("reactive", 20.0), ("always", 5.0), ("reactive", 5.0)]
    assert {p["cold_start_s"] for p in doc["fleets"]} == {20.0, 5.0}
    out, _ = simulate(capsys, *flags)
    assert "cold start" in out.splitlines()[1] and " 5s " in out
    with pytest.raises(SystemExit):
        parse(*SHORT, "--cold-start", "5s,5s")
    assert "each duration once" in capsys.readouterr().err


def test_a_zero_start_costs_the_first_cold_start_and_a_warm_one_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = (*SHORT, "--policies", "hpa,tidal,reactive", "--cold-start", "30s")
    _, warm = simulate(capsys, *flags, "--json")
    _, zero = simulate(capsys, *flags, "--start", "zero", "--json")
    assert (warm["start"], zero["start"]) == ("warm", "zero")
    assert all(row["first_cold_start_missed"] == 0 for row in warm["policies"])
    assert all(row["first_cold_start_missed"] > 0 for row in zero["policies"])
    out, _ = simulate(capsys, *flags, "--start", "zero")
    line = next(x for x in out.splitlines() if x.startswith("first cold start"))
    assert "hpa " in line and "tidal " in line and "reactive " in line


def test_bad_choices_are_refused_naming_what_is_allowed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse(*SHORT, "--start", "60s")
    assert "choose from 'warm', 'zero'" in capsys.readouterr().err
    assert cli.run(parse(*SHORT, "--policies", "always-on-0")) == 2
    assert "always-on-N" in capsys.readouterr().err
