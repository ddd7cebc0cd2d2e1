"""Charts (simulator.charts): both PNGs are written; a missing matplotlib or an
unknown policy is a clear error, not a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from simulator.charts import ChartsUnavailable, write_charts
from simulator.runner import PolicyRun, SimulationOptions, run_policies
from simulator.traces import TraceRequest


@pytest.fixture(scope="module")
def runs() -> list[PolicyRun]:
    return run_policies(
        [TraceRequest(1.0 + i * 0.1, 200, 5) for i in range(20)],
        SimulationOptions(policies=("hpa", "tidal")),
    )


def test_writes_the_pareto_and_the_replicas_chart(tmp_path: Path, runs: list[PolicyRun]) -> None:
    pytest.importorskip("matplotlib", reason="charts need the loadtest extra")
    written = write_charts(runs, tmp_path / "out", focus="tidal")
    assert [p.name for p in written] == ["pareto.png", "replicas-tidal.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


def test_missing_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: list[PolicyRun]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ChartsUnavailable, match=r"loadtest"):
        write_charts(runs, tmp_path, focus="tidal")


def test_unknown_policy_is_named(tmp_path: Path, runs: list[PolicyRun]) -> None:
    with pytest.raises(ChartsUnavailable, match="no policy 'kpa'"):
        write_charts(runs, tmp_path, focus="kpa")
