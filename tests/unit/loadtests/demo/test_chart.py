"""The demo's chart: three panels on one time axis, the no-replica stretches shaded in each.

Covers: the SVG parses; each panel has its title; every stretch with no
ready replica is shaded in all three panels (TTFT included); each answered
request is a dot and each failed one a mark; the objective is drawn; and
``write_outputs`` writes the summary and the chart side by side.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from loadtests.demo.chart import render_svg, zero_ready_spans
from loadtests.demo.observe import ClusterSample, DemoTracker, RequestResult
from loadtests.demo.story import write_outputs

SVG = "{http://www.w3.org/2000/svg}"


def _run() -> DemoTracker:
    tracker = DemoTracker()
    for i in range(60):
        t = i * 0.5
        ready = 0 if t < 5 or t >= 25 else (3 if 10 <= t < 20 else 1)
        tracker.sample(ClusterSample(at_s=t, desired=max(ready, 1), ready=ready, pods=ready))
    tracker.result(RequestResult(started_s=1.0, status=200, ttft_s=4.2, total_s=5.0))
    for i in range(8):
        tracker.result(RequestResult(started_s=10.0 + i, status=200, ttft_s=0.05, total_s=1.0))
    tracker.result(RequestResult(started_s=12.0, status=503, ttft_s=None, total_s=0.1))
    return tracker


def test_three_panels_shaded_where_no_replica_was_ready() -> None:
    tracker = _run()
    assert zero_ready_spans(tracker.samples, 30.0) == [(0.0, 5.0), (25.0, 30.0)]
    root = ET.fromstring(render_svg(tracker.samples, tracker.results, slo_ttft_s=2.0))
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    for title in ("Load at the activator", "Time to first token", "Replicas"):
        assert any(t.startswith(title) for t in texts), title
    shaded = [
        r
        for r in root.iter(SVG + "rect")
        if (r.findtext(SVG + "title") or "") == "no ready replica"
    ]
    assert len(shaded) == 2 * 3  # two stretches, in each of the three panels
    assert len(list(root.iter(SVG + "circle"))) == 9  # every answered request
    assert texts.count("x") == 1  # the failed one
    assert "objective 2s" in texts


def test_the_summary_and_the_chart_are_written_side_by_side(tmp_path: Path) -> None:
    summary, chart = write_outputs(tmp_path, "requests 10", _run(), 2.0)
    assert summary.parent == chart.parent == tmp_path / "demo"
    assert summary.read_text() == "requests 10\n"
    assert ET.parse(chart).getroot().tag == SVG + "svg"
