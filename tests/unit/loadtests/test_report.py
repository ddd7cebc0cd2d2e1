"""The load-test report (loadtests.report), from hand-written locust-format CSVs.

Covers:
- with a request log: requests sent/completed/failed per bucket, exact
  percentiles placed at the bucket where each request began, TTFT/TPOT
  rows kept apart from requests;
- without one: rates from the change of locust's running totals, and
  locust's percentiles (ms to s), N/A read as missing;
- replicas: the last sample by the end of each bucket; cold starts counted
  as ready going from 0 to more than 0; several replicas files (a
  Deployment and its spot companion) summed into one fleet;
- the CLI writes the merged CSV and the PNGs, and names a missing input;
- nearest-rank percentiles and the automatic bucket width;
- the latency charts: a line breaks over a second with no request, and p95
  stays visible where it equals p99 (drawn above it, in another style).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from loadtests import report

T0 = 1_800_000_000
HISTORY_HEADER = (
    "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,"
    "99.9%,99.99%,100%,Total Request Count,Total Failure Count,Total Median Response Time,"
    "Total Average Response Time,Total Min Response Time,Total Max Response Time,"
    "Total Average Content Size"
)


def history_line(t: int, users: int, kind: str, name: str, total: int, failures: int,
                 p50: str, p95: str, p99: str) -> str:  # fmt: skip
    pcts = [p50, p50, p50, p50, p95, p95, p99, p99, p99, p99, p99]
    return ",".join([str(T0 + t), str(users), kind, name, "0", "0", *pcts, str(total),
                     str(failures), "0", "0", "0", "0", "0"])  # fmt: skip


def write_run(tmp_path: Path, *, with_log: bool) -> Path:
    prefix = tmp_path / "run"
    lines = [HISTORY_HEADER]
    name = "/v1/chat/completions stream"
    for t, users, total, failures, p50 in [(0, 0, 0, 0, "N/A"), (1, 4, 0, 0, "N/A"),
                                           (2, 4, 4, 0, "3000"), (3, 4, 10, 1, "200")]:  # fmt: skip
        lines.append(history_line(t, users, "", "Aggregated", total * 3, failures, p50, p50, p50))
        if total:
            lines.append(history_line(t, users, "POST", name, total, failures, p50, p50, p50))
            lines.append(history_line(t, users, "TTFT", name, total, 0, "50", "60", "70"))
    Path(f"{prefix}_stats_history.csv").write_text("\n".join(lines) + "\n")
    Path(f"{prefix}_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,50%,99%\n"
        f"POST,{name},10,1,200,3000\nTTFT,{name},9,0,50,2900\n,Aggregated,19,1,100,3000\n"
    )
    if with_log:
        rows = ["origin_unix_s,type,name,response_time_s,ok,error"]
        # Four requests held through a 2 s cold start, sent at 1.x s...
        for i in range(4):
            rows.append(f"{T0 + 1.2 + i / 10},POST,{name},{2.5 - i / 10},1,")
            rows.append(f"{T0 + 1.2 + i / 10},TTFT,{name},{2.0 - i / 10},1,")
        # ...then warm ones sent at 3.x s, one of which failed.
        rows.append(f"{T0 + 3.1},POST,{name},0.2,1,")
        rows.append(f"{T0 + 3.1},TTFT,{name},0.05,1,")
        rows.append(f"{T0 + 3.5},TPOT,{name},0.01,1,")
        rows.append(f"{T0 + 3.2},POST,{name},0.1,0,HTTP 503")
        Path(f"{prefix}_requests.csv").write_text("\n".join(rows) + "\n")
    return prefix


def write_replicas(tmp_path: Path) -> Path:
    path = tmp_path / "replicas.csv"
    path.write_text(
        "timestamp,desired,ready,error\n"
        f"{T0 - 1.0},0,0,\n{T0 + 1.5},1,0,\n{T0 + 3.2},,,HTTP 503\n{T0 + 3.4},2,1,\n"
        f"{T0 + 5.0},0,0,\n{T0 + 6.0},1,1,\n"
    )
    return path


def test_merge_with_the_request_log(tmp_path: Path) -> None:
    prefix = write_run(tmp_path, with_log=True)
    rows = report.merge(
        report.read_stats_history(Path(f"{prefix}_stats_history.csv")),
        report.read_replicas(write_replicas(tmp_path)),
        report.read_request_log(Path(f"{prefix}_requests.csv")),
    )
    by_time = {r.time_s: r for r in rows}
    assert rows[0].timestamp == T0 - 1  # the replicas sampler started first
    held = by_time[2.0]  # the second T0 + 1
    assert (held.sent_per_s, held.requests_per_s, held.users) == (4, 0, 4)
    assert held.ttft_p50_s == pytest.approx(1.8)  # of 2.0, 1.9, 1.8, 1.7
    assert held.ttft_p99_s == pytest.approx(2.0)
    assert held.e2e_p95_s == pytest.approx(2.5)
    assert (held.desired, held.ready) == (1, 0)
    answered = by_time[4.0]  # T0 + 3: the held ones complete, warm ones begin
    assert (answered.sent_per_s, answered.requests_per_s, answered.failures_per_s) == (2, 6, 1)
    assert answered.ttft_p50_s == pytest.approx(0.05)
    assert answered.tpot_p50_s == pytest.approx(0.01)
    assert answered.e2e_p99_s == pytest.approx(0.2)  # the failed one is not a latency
    assert (answered.desired, answered.ready) == (2, 1)  # the failed poll is skipped over
    assert rows[-1].total_requests == 6
    assert rows[-1].total_failures == 1


def test_merge_from_locust_history_alone(tmp_path: Path) -> None:
    prefix = write_run(tmp_path, with_log=False)
    rows = report.merge(report.read_stats_history(Path(f"{prefix}_stats_history.csv")))
    assert [r.requests_per_s for r in rows] == [None, 0, 4, 6]
    assert [r.failures_per_s for r in rows] == [None, 0, 0, 1]
    assert rows[1].e2e_p50_s is None  # N/A
    assert rows[2].e2e_p50_s == pytest.approx(3.0)
    assert rows[3].ttft_p95_s == pytest.approx(0.06)


def test_cli_writes_csv_pngs_and_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = write_run(tmp_path, with_log=True)
    code = report.main(
        [str(prefix), "--replicas", str(write_replicas(tmp_path)), "--title", "t", "--json"]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["requests"] == 6
    assert summary["failures"] == 1
    assert summary["ttft_p99_s"] == pytest.approx(2.0)
    assert summary["peak_ready"] == 1
    assert summary["cold_starts"] == 2  # 0 -> 1 at T0 + 3.4, and again at T0 + 6
    assert summary["final_ready"] == 1
    with Path(f"{prefix}_report.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {"time_s", "requests_per_s", "ttft_p99_s", "e2e_p50_s", "desired", "ready"} <= set(
        rows[0]
    )
    for chart in ("report", *report.CHARTS):
        png = Path(f"{prefix}_{chart}.png")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_cli_names_a_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main([str(tmp_path / "nothing")]) == 2
    assert "nothing_stats_history.csv does not exist" in capsys.readouterr().err


def test_percentile_and_bucket_width() -> None:
    assert report.percentile([], 0.5) is None
    assert report.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert report.percentile([float(i) for i in range(1, 101)], 0.99) == 99.0
    assert report.auto_bucket_s(120) == 1.0
    assert report.auto_bucket_s(3600) == 15.0


def _latency_axes(rows: list[report.MergedRow]) -> object:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots()
    report.draw_chart(ax, "ttft", rows)
    plt.close(figure)
    return ax


def test_latency_lines_break_over_seconds_without_a_request(tmp_path: Path) -> None:
    prefix = write_run(tmp_path, with_log=True)
    rows = report.merge(
        report.read_stats_history(Path(f"{prefix}_stats_history.csv")),
        (),
        report.read_request_log(Path(f"{prefix}_requests.csv")),
    )
    # T0 + 1 and T0 + 3 had requests, T0 + 2 none: its point is a gap (NaN),
    # so the line does not join the held requests' TTFT to the warm ones'.
    by_time = {r.time_s: r for r in rows}
    assert by_time[1.0].ttft_p50_s is not None
    assert by_time[2.0].ttft_p50_s is None
    assert by_time[3.0].ttft_p50_s is not None
    ax = _latency_axes(rows)
    for line in ax.get_lines():  # type: ignore[attr-defined]
        ys = dict(zip(line.get_xdata(), line.get_ydata(), strict=True))
        assert math.isnan(ys[2.0]), line.get_label()
        assert not math.isnan(ys[1.0])


def test_p95_stays_visible_where_it_equals_p99(tmp_path: Path) -> None:
    prefix = write_run(tmp_path, with_log=True)
    rows = report.merge(
        report.read_stats_history(Path(f"{prefix}_stats_history.csv")),
        (),
        report.read_request_log(Path(f"{prefix}_requests.csv")),
    )
    assert rows[3].ttft_p95_s == rows[3].ttft_p99_s  # one warm request: all equal
    ax = _latency_axes(rows)
    lines = {line.get_label(): line for line in ax.get_lines()}  # type: ignore[attr-defined]
    p95, p99 = lines["p95"], lines["p99"]
    # Drawn above p99, in another style, narrower than it: both show.
    assert p95.get_zorder() > p99.get_zorder()
    assert p95.get_linestyle() != p99.get_linestyle()
    assert p95.get_linewidth() < p99.get_linewidth()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]  # type: ignore[attr-defined]
    assert legend[:3] == ["p50", "p95", "p99"]


def test_a_deployment_and_its_spot_companion_chart_as_one_fleet() -> None:
    sample = report.ReplicaSample
    on_demand = [sample(10.0, 1, 1), sample(12.0, 1, 1), sample(14.0, 1, 0)]
    spot = [sample(11.0, 2, 1), sample(13.0, None, None), sample(15.0, 3, 3)]
    fleet = report.combine_replicas([on_demand, spot])
    assert [(s.timestamp, s.desired, s.ready) for s in fleet] == [
        (10.0, 1, 1),  # the companion not sampled yet: it counts as none
        (11.0, 3, 2),
        (12.0, 3, 2),
        (13.0, None, None),  # the companion's poll failed: the sum is unknown
        (14.0, None, None),
        (15.0, 4, 3),
    ]


def test_every_panel_ttft_included_shades_the_stretches_without_a_ready_replica() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ttft = [5.0, 4.0, None, 0.05, 0.05, None]
    rows = [
        report.MergedRow(t, 1e9 + t, 1, 1.0, 1.0, 0.0, t, 0, v, v, v, v, v, v, None, None, 1, r)
        for t, (v, r) in enumerate(zip(ttft, [0, 0, 0, 1, 1, 0], strict=True))
    ]
    for chart in report.CHARTS:
        figure, ax = plt.subplots()
        report.draw_chart(ax, chart, rows)
        shaded = [p for p in ax.patches if p.get_label() == "no ready replica"]
        plt.close(figure)
        assert shaded, chart
