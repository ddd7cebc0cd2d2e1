"""The demo's chart: load, time to first token and replicas on one time axis, as SVG.

``tidal demo`` writes it beside its summary, so the story it told in lines
can be seen at a glance: the load the activator held and forwarded, each
request's TTFT at the moment it was sent (the first one is the cold start),
and the replicas asked for and ready, with the stretches where no replica
was ready shaded in every panel, as the load-test report shades them.

Main decision: **SVG written by hand, not matplotlib**. ``make demo``
installs only the sandbox's dependencies (matplotlib belongs to the
load-test extra, with numpy and its fonts); three panels of lines, dots and
rectangles need none of that, and any browser shows the file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from loadtests.demo.observe import ClusterSample, RequestResult

__all__ = ["render_svg", "zero_ready_spans"]

_WIDTH = 900
_LEFT = 70
_RIGHT = 150  # room for the legend
_PANEL_H = 150
_GAP = 45
_TOP = 55
_SHADE = "#e6e6e6"


def zero_ready_spans(samples: Sequence[ClusterSample], end_s: float) -> list[tuple[float, float]]:
    """The stretches (start, end) in which no replica was ready."""
    spans: list[tuple[float, float]] = []
    start: float | None = None
    for s in samples:
        if s.ready == 0 and start is None:
            start = s.at_s
        elif s.ready > 0 and start is not None:
            spans.append((start, s.at_s))
            start = None
    if start is not None:
        spans.append((start, end_s))
    return spans


@dataclass(frozen=True, slots=True)
class _Panel:
    """One panel's place on the page and the range of its y axis."""

    top: float
    y_max: float
    x_max: float

    def x(self, t: float) -> float:
        return _LEFT + (_WIDTH - _LEFT - _RIGHT) * min(max(t, 0.0), self.x_max) / self.x_max

    def y(self, v: float) -> float:
        return self.top + _PANEL_H * (1 - min(max(v, 0.0), self.y_max) / self.y_max)


def _nice_max(value: float) -> float:
    """A round axis maximum at or above ``value`` (1, 2, 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    scale = 10 ** len(str(int(value))) / 10 if value >= 1 else 0.1
    for step in (1, 2, 5, 10):
        if value <= step * scale:
            return float(step * scale)
    return float(10 * scale)


def _frame(p: _Panel, title: str, unit: str, spans: Sequence[tuple[float, float]]) -> list[str]:
    out = [
        f'<rect x="{p.x(a):.1f}" y="{p.top}" width="{max(p.x(b) - p.x(a), 0.5):.1f}" '
        f'height="{_PANEL_H}" fill="{_SHADE}"><title>no ready replica</title></rect>'
        for a, b in spans
    ]
    right = _WIDTH - _RIGHT
    out.append(
        f'<rect x="{_LEFT}" y="{p.top}" width="{right - _LEFT}" height="{_PANEL_H}" '
        'fill="none" stroke="#444"/>'
    )
    out.append(f'<text x="{_LEFT}" y="{p.top - 8}" font-size="13">{escape(title)}</text>')
    for frac in (0.0, 0.5, 1.0):
        v = p.y_max * frac
        out.append(
            f'<text x="{_LEFT - 6}" y="{p.y(v) + 4:.1f}" font-size="11" '
            f'text-anchor="end">{v:g}</text>'
        )
    out.append(
        f'<text x="16" y="{p.top + _PANEL_H / 2}" font-size="11" '
        f'transform="rotate(-90 16 {p.top + _PANEL_H / 2})" text-anchor="middle">'
        f"{escape(unit)}</text>"
    )
    return out


def _legend(p: _Panel, entries: Sequence[tuple[str, str]]) -> list[str]:
    x = _WIDTH - _RIGHT + 12
    out = []
    for i, (colour, label) in enumerate([*entries, (_SHADE, "no ready replica")]):
        y = p.top + 14 + 18 * i
        out.append(f'<rect x="{x}" y="{y - 9}" width="12" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + 18}" y="{y}" font-size="11">{escape(label)}</text>')
    return out


def _polyline(points: Sequence[tuple[float, float]], colour: str, dash: str = "") -> str:
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dashed}/>'


def _step(p: _Panel, samples: Sequence[ClusterSample], value: str) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    for s in samples:
        v = float(getattr(s, value))
        if points:
            points.append((p.x(s.at_s), points[-1][1]))
        points.append((p.x(s.at_s), p.y(v)))
    return points


def render_svg(
    samples: Sequence[ClusterSample],
    results: Sequence[RequestResult],
    *,
    slo_ttft_s: float | None = None,
    title: str = "",
) -> str:
    """The chart of one demo run: its cluster samples and its requests."""
    end_s = max([s.at_s for s in samples] + [r.started_s + r.total_s for r in results] + [1.0])
    spans = zero_ready_spans(samples, end_s)
    x_max = 10.0 * math.ceil(end_s / 10)
    out: list[str] = []

    load = _Panel(_TOP, _nice_max(max([s.buffered + s.in_flight for s in samples] + [1])), x_max)
    out += _frame(load, "Load at the activator: requests held and in flight", "requests", spans)
    total = [(load.x(s.at_s), load.y(s.buffered + s.in_flight)) for s in samples]
    held = [(load.x(s.at_s), load.y(s.buffered)) for s in samples]
    out += [_polyline(total, "#1f77b4"), _polyline(held, "#9467bd", "5,3")]
    out += _legend(load, [("#1f77b4", "held + in flight"), ("#9467bd", "held")])

    ttfts = [r.ttft_s for r in results if r.ttft_s is not None]
    ttft = _Panel(_TOP + _PANEL_H + _GAP, _nice_max(max([*ttfts, slo_ttft_s or 0, 0.1])), x_max)
    out += _frame(ttft, "Time to first token, by when the request was sent", "seconds", spans)
    if slo_ttft_s is not None:
        y = ttft.y(slo_ttft_s)
        out.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_WIDTH - _RIGHT}" y2="{y:.1f}" '
            'stroke="#2ca02c" stroke-dasharray="4,3"/>'
        )
    for r in results:
        if r.ok and r.ttft_s is not None:
            out.append(
                f'<circle cx="{ttft.x(r.started_s):.1f}" cy="{ttft.y(r.ttft_s):.1f}" r="3" '
                f'fill="#ff7f0e"><title>{r.ttft_s:.2f}s</title></circle>'
            )
        elif not r.ok:
            out.append(
                f'<text x="{ttft.x(r.started_s):.1f}" y="{ttft.top + 12}" fill="#d62728" '
                'font-size="12" text-anchor="middle">x</text>'
            )
    marks = [("#ff7f0e", "a request's TTFT"), ("#d62728", "failed (x)")]
    if slo_ttft_s is not None:
        marks.append(("#2ca02c", f"objective {slo_ttft_s:g}s"))
    out += _legend(ttft, marks)

    peak = max([max(s.desired, s.ready) for s in samples] + [1])
    reps = _Panel(_TOP + 2 * (_PANEL_H + _GAP), float(peak + 1), x_max)
    out += _frame(reps, "Replicas: asked for (spec.replicas) and ready", "replicas", spans)
    out += [_polyline(_step(reps, samples, "desired"), "#ff7f0e", "6,3")]
    out += [_polyline(_step(reps, samples, "ready"), "#2ca02c")]
    out += _legend(reps, [("#ff7f0e", "desired"), ("#2ca02c", "ready")])

    axis_y = reps.top + _PANEL_H
    every = 10 if x_max <= 200 else 60
    for tick in range(0, int(x_max) + 1, every):
        out.append(
            f'<text x="{reps.x(tick):.1f}" y="{axis_y + 16}" font-size="11" '
            f'text-anchor="middle">{tick}</text>'
        )
    out.append(
        f'<text x="{(_LEFT + _WIDTH - _RIGHT) / 2}" y="{axis_y + 34}" font-size="12" '
        'text-anchor="middle">seconds since the story began</text>'
    )
    height = axis_y + 50
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {_WIDTH} {height:.0f}" font-family="sans-serif">'
        f'<rect width="100%" height="100%" fill="white"/>'
        f'<text x="{_LEFT}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>'
    )
    return "\n".join([head, *out, "</svg>"]) + "\n"
