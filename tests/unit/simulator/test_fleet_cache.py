"""Fixed fleets run once per trace and world (simulator.fleet_cache), rows side by side.

Covers: a fleet asked for again, by this process or another with the same
folder, is the stored run, equal to a fresh one; another trace, world or
size is a different entry, and an on-demand fleet's cold start is not part
of its key; an entry cut short is run again and rewritten; ``off`` in the
environment turns the disk copy off; a custom balancer is never cached;
``jobs`` above 1 gives the same rows as one process, with the CPU each row
took; ``tidal simulate --fleet-cache DIR --jobs 2`` run twice keeps its
fleets there and prints the same rows.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from simulator import cli
from simulator.baselines import AlwaysOn
from simulator.fleet_cache import CACHE_DIR_ENV, FleetCache, default_cache_dir
from simulator.prefix_routing import balancer
from simulator.runner import SimulationOptions, run_policies
from simulator.traces import TraceRequest
from simulator.world import ColdStart, RunResult, WorldConfig, run_world

TRACE = [
    TraceRequest(start + i * 0.05, 2000 + 10 * i, 5 + i % 3, priority=i % 2, tenant=f"t{i % 3}")
    for start in (1.0, 15.0)
    for i in range(40)
]
WORLD = WorldConfig(cold_start=ColdStart(5.0))


class Counted:
    """A fleet's run that counts how often it was really simulated."""

    def __init__(self, requests: list[TraceRequest], size: int, world: WorldConfig) -> None:
        self.args = (requests, size, world)
        self.calls = 0

    def __call__(self) -> RunResult:
        self.calls += 1
        requests, size, world = self.args
        return run_world(requests, AlwaysOn(size), world)


def fetch(cache: FleetCache, size: int = 2, world: WorldConfig = WORLD) -> tuple[RunResult, int]:
    run = Counted(TRACE, size, world)
    result = cache.run(TRACE, cache.trace_key(TRACE), size, world, run)
    return result, run.calls


def test_a_stored_fleet_is_reused_across_processes_and_equals_a_fresh_run(tmp_path: Path) -> None:
    fresh, calls = fetch(FleetCache(tmp_path))
    assert calls == 1
    again, calls = fetch(FleetCache(tmp_path))  # a new cache object: as another run would
    assert calls == 0
    assert again == fresh


def test_trace_world_and_size_are_each_part_of_the_key(tmp_path: Path) -> None:
    cache = FleetCache(tmp_path)
    fetch(cache)
    assert fetch(cache, size=3)[1] == 1
    assert fetch(cache, world=replace(WORLD, seed=2))[1] == 1
    other = [replace(r, output_tokens=r.output_tokens + 1) for r in TRACE]
    assert cache.trace_key(other) != cache.trace_key(TRACE)
    # Warm from the start and never replaced: the cold start does not matter.
    assert fetch(cache, world=replace(WORLD, cold_start=ColdStart(60.0)))[1] == 0


def test_an_entry_cut_short_is_run_again_and_rewritten(tmp_path: Path) -> None:
    fresh, _ = fetch(FleetCache(tmp_path))
    (entry,) = tmp_path.rglob("*.fleet")
    entry.write_bytes(entry.read_bytes()[:100])
    again, calls = fetch(FleetCache(tmp_path))
    assert calls == 1 and again == fresh
    assert fetch(FleetCache(tmp_path))[1] == 0


def test_off_in_the_environment_keeps_nothing_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, "off")
    assert default_cache_dir() is None
    monkeypatch.setenv(CACHE_DIR_ENV, "/somewhere")
    assert default_cache_dir() == Path("/somewhere")


def test_a_custom_balancer_is_never_cached(tmp_path: Path) -> None:
    world = replace(WORLD, balancer=balancer("prefix"))
    cache = FleetCache(tmp_path)
    assert fetch(cache, world=world)[1] == 1
    assert fetch(cache, world=world)[1] == 1
    assert not list(tmp_path.rglob("*.fleet"))


def test_rows_in_processes_are_the_rows_of_one_process() -> None:
    options = SimulationOptions(world=WORLD, max_replicas=4)
    alone = run_policies(TRACE, options)
    side_by_side = run_policies(TRACE, replace(options, jobs=2))
    assert [r.scorecard for r in side_by_side] == [r.scorecard for r in alone]
    assert [r.fleets for r in side_by_side] == [r.fleets for r in alone]
    assert all(r.cpu_s > 0 for r in side_by_side if r.scorecard.name != "oracle")


def test_the_command_reuses_fleets_kept_in_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    flags = [
        "--trace", "synthetic:bursts", "--synthetic-duration", "1m", "--max-replicas", "3",
        "--policies", "always-on,hpa", "--json", "--fleet-cache", str(tmp_path), "--jobs", "2",
    ]  # fmt: skip
    documents = []
    for _ in range(2):
        assert cli.run(parser.parse_args(flags)) == 0
        documents.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert list(tmp_path.rglob("*.fleet"))
    first, again = (
        [{k: v for k, v in p.items() if k != "cpu_s"} for p in d["policies"]] for d in documents
    )
    assert again == first
    assert all(p["cpu_s"] >= 0 for d in documents for p in d["policies"])
