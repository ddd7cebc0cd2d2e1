"""The battery (simulator.battery): its grid, its verdicts, its runs and its command.

Covers: the grid selects workloads by name or by the part before '@' and
refuses unknown ones; the limits (chat, the swinging loads, the code trace
at 5 s); a cell's score is over 1 exactly when a fleet or a baseline
dominates tidal, or a limit is missed, and the table puts the worst cell
last; one small cell run through the real runs, in one process and in
two, gives the same rows and a frontier; the command exits 1 when a cell
fails and 2 on an unknown workload; a saved run renders the same table
again and writes it into a page between its markers.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.battery import grid, report
from simulator.battery.__main__ import main
from simulator.battery.grid import Cell, Workload, cells, limits
from simulator.battery.report import judge_cell, table, to_json
from simulator.battery.runs import CellRuns, run_cells
from simulator.frontier import FleetPoint
from simulator.scorecard import Scorecard

CARD = Scorecard(
    name="tidal",
    requests=100,
    slo_ttft_s=2.0,
    slo_attainment=0.95,
    goodput_rps=1.0,
    completed=100,
    failed=0,
    failed_by_reason={},
    ttft_p50_s=0.1,
    ttft_p99_s=1.0,
    cold_starts=0,
    cold_start_wait_p50_s=None,
    cold_start_wait_p99_s=None,
    gpu_seconds=7200.0,
    gpu_seconds_busy=3600.0,
    gpu_seconds_idle=3600.0,
    gpu_seconds_spot=0.0,
    gpu_seconds_on_demand=7200.0,
    cost=8.0,
    peak_replicas=2,
    preemptions=0,
    duration_s=3600.0,
)
FLEETS = (
    FleetPoint(1, 0.80, 3600.0, 4.0, True),
    FleetPoint(2, 0.96, 7200.0, 8.0, True),
    FleetPoint(3, 0.99, 10800.0, 12.0, True),
)
PLAIN = Workload("plain", ("--trace", "code"))


def _runs(attainment: float, gpu_s: float, workload: Workload = PLAIN) -> CellRuns:
    tidal = replace(CARD, slo_attainment=attainment, gpu_seconds=gpu_s)
    return CellRuns(Cell(workload, 60.0), tidal, (), FLEETS, 1.0)


def test_the_grid_by_name_and_family() -> None:
    assert [c.name for c in cells(["code@2x"], [60.0])] == ["code@2x 60s"]
    assert len(cells(["code"], [5.0])) == 5
    assert len(cells(["long-prompt"])) == 9
    with pytest.raises(ValueError, match="unknown workloads"):
        cells(["cod"])


def test_the_limits_of_chat_and_of_swinging_loads() -> None:
    [chat] = cells(["chat"], [60.0])
    assert limits(chat).chat_goal == 0.99 and limits(chat).chat_ratio == 1.15
    [code5, code60] = cells(["code@1x"], [5.0, 60.0])
    assert limits(code5).swing_ratio == 0.75 and limits(code60).swing_ratio is None
    assert all(limits(c).swing_ratio == 0.75 for c in cells(["reasoning", "diurnal"]))


def test_a_dominated_or_costly_cell_scores_over_one() -> None:
    assert judge_cell(_runs(0.96, 7200.0)).score <= 1
    # Fleet 2 meets more for the same GPU-hours.
    dominated = judge_cell(_runs(0.95, 7200.0))
    assert dominated.score > 1 and dominated.why.startswith("fleet 2")
    # Fleet 2 meets as much for 0.94x the GPU-hours.
    assert judge_cell(_runs(0.96, 7200.0 / 0.94)).score > 1
    # A baseline dominates as a fleet does.
    keda = replace(CARD, name="keda-http", slo_attainment=0.97, gpu_seconds=7000.0)
    assert judge_cell(replace(_runs(0.96, 7200.0), baselines=(keda,))).score > 1
    swinging = replace(PLAIN, swings=True)
    assert judge_cell(_runs(0.96, 0.7 * 7200.0, swinging)).score <= 1
    assert judge_cell(_runs(0.96, 0.8 * 7200.0, swinging)).why.startswith("swing")
    chat = replace(PLAIN, chat=True)
    assert judge_cell(_runs(0.995, 1.1 * 10800.0, chat)).score <= 1
    assert judge_cell(_runs(0.995, 1.2 * 10800.0, chat)).why.startswith("chat: 1.20x")
    assert judge_cell(_runs(0.985, 0.5 * 10800.0, chat)).why == "chat: under 99%"


def test_the_worst_cell_is_last() -> None:
    judged = [judge_cell(_runs(0.95, 7200.0)), judge_cell(_runs(0.96, 7000.0))]
    lines = table(judged).splitlines()
    assert "ok" in lines[2] and "fleet 2" in lines[3]
    scores = [float(str(c["score"])) for c in to_json(judged)]
    assert scores == sorted(scores)


def test_a_small_cell_runs_alike_in_one_process_and_in_two() -> None:
    tiny = Cell(
        Workload("tiny", ("--trace", "synthetic:bursts", "--synthetic-duration", "3m")), 5.0
    )
    [one] = run_cells([tiny], tidal_only=True, progress=lambda _: None)
    [two] = run_cells([tiny], jobs=2, tidal_only=True, progress=lambda _: None)
    assert one.tidal.name == "tidal" and one.baselines == ()
    assert one.fleets and one.fleets[0].replicas == 1
    assert (one.tidal.slo_attainment, one.tidal.gpu_seconds) == (
        two.tidal.slo_attainment,
        two.tidal.gpu_seconds,
    )
    assert one.fleets == two.fleets


def test_the_command_refuses_an_unknown_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--workload", "nope"]) == 2
    assert "unknown workloads" in capsys.readouterr().err


def test_the_command_prints_json_and_fails_a_failing_cell(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = Workload("tiny", ("--trace", "synthetic:bursts", "--synthetic-duration", "3m"))
    monkeypatch.setattr(grid, "WORKLOADS", (tiny,))
    status = main(["--workload", "tiny", "--cold-start", "5s", "--tidal-only", "--json"])
    document = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    [cell] = document["cells"]
    assert cell["cell"] == "tiny 5s" and cell["fleets"]
    assert status == (1 if cell["score"] > 1 else 0)


def test_a_saved_run_renders_again_and_writes_its_table_into_a_page(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tiny = Workload("tiny", ("--trace", "synthetic:bursts", "--synthetic-duration", "3m"))
    monkeypatch.setattr(grid, "WORKLOADS", (tiny,))
    monkeypatch.setattr(report, "WORKLOADS", (tiny,))
    saved = tmp_path / "run.json"
    main(["--workload", "tiny", "--cold-start", "5s", "--tidal-only", "--save", str(saved)])
    first = capsys.readouterr().out
    page = tmp_path / "page.md"
    page.write_text(
        "before\n<!-- BEGIN generated:battery by `make frontier` -->\nold\n"
        "<!-- END generated:battery -->\nafter\n"
    )
    main(["--render", str(saved), "--doc", str(page)])
    again = capsys.readouterr().out
    assert again.splitlines()[:3] == first.splitlines()[:3]
    text = page.read_text()
    # The page quotes the command that ran the cells, as the saved run recorded it.
    command = "$ python -m simulator.battery --workload tiny --cold-start 5s --tidal-only"
    assert "\nold\n" not in text and command in text and "tiny 5s" in text
    assert text.startswith("before\n") and text.endswith("after\n")
    assert main(["--render", str(tmp_path / "missing.json")]) == 2
    # A later tidal-only run replaces the tidal row and keeps the baselines.
    full = json.loads(saved.read_text())
    full["cells"][0]["baselines"] = [full["cells"][0]["tidal"] | {"name": "hpa"}]
    saved.write_text(json.dumps(full))
    later = json.loads(saved.read_text())
    later["cells"][0]["baselines"] = []
    later["cells"][0]["tidal"]["gpu_seconds"] = 1.0
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(later))
    [merged] = report.from_json([saved.read_text(), newer.read_text()])
    assert merged.tidal.gpu_seconds == 1.0 and [b.name for b in merged.baselines] == ["hpa"]
