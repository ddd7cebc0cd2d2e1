"""``tidal status``'s table: the columns, narrow or wide, and the legends that say what they mean.

The default columns fit 100 characters for names of a usual length (with
live values, DESIRED and MODE are the scaler's now, and the one signal every
model has); ``-o wide`` shows every column, as kubectl's does. Under the
table come the lines of :mod:`scaler.status.notes` and
:mod:`scaler.status.pools`, then, with live values, the legend: REASON and
LIVE-REASON read apart, and what a ``-`` means in the wide columns.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from scaler.status.notes import problem_lines, under_table_lines
from scaler.status.pools import pool_lines

__all__ = ["render_table"]


_LEGEND = (
    "REASON: why the scale last changed (status annotation); "
    "LIVE-REASON: what the scaler says now (GET /v1/targets). "
    "MODE panic beside LIVE-REASON Steady is usual: in panic the scale is never lowered, "
    "so it stays where the burst put it."
)
_NARROW_LEGEND = " -o wide shows every column."
# What a "-" means in the columns only -o wide shows.
_WIDE_LEGEND = (
    "QUEUE, KV-CACHE and GPU: the stable window's average of a signal the model scales on. "
    "'-' there: the model does not scale on it (no autoscaling.tidal.dev/target-queue-depth, "
    "target-kv-cache-utilization or target-gpu-utilization annotation), or no sample has "
    "arrived yet (GPU comes from DCGM through the scaler's --prometheus-url, or from Triton "
    "itself). '-' elsewhere: not known yet, or not in use (ON-DEMAND and SPOT without a spot "
    "placement)."
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _wide_columns(table: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Every column (``-o wide``): the status annotation's, the live ones, the warm tier's."""
    headers = ["NAMESPACE", "NAME", "DESIRED", "READY", "ON-DEMAND", "SPOT", "MODE", "REASON"]
    keys = ["namespace", "name", "desired", "ready", "on_demand", "spot", "mode", "reason"]
    if any(r.get("pool") for r in table):
        headers.insert(2, "POOL")
        keys.insert(2, "pool")
    with_live = any("live" in r for r in table)
    if with_live:
        headers += [
            "LIVE-DESIRED",
            "LIVE-REASON",
            "CONCURRENCY",
            "QUEUE",
            "KV-CACHE",
            "GPU",
            "$/H",
            "SAVED-$/H",
        ]
    with_warm = any("warm" in (r.get("live") or {}) for r in table)
    if with_warm:
        headers += ["ASLEEP", "WAKES", "LAST-WAKE"]
    lines = []
    for r in table:
        cells = [_fmt(r.get(k)) for k in keys]
        live = r.get("live") or {}
        if with_live:
            cost = live.get("cost") or {}
            cells += [
                _fmt(live.get("desired")),
                _fmt(live.get("reason")),
                _stable(live, "concurrency"),
                _stable(live, "queue_depth"),
                _stable(live, "kv_cache_utilization"),
                _stable(live, "gpu_utilization"),
                _fmt(cost.get("dollars_per_hour")),
                _fmt(cost.get("saving_dollars_per_hour")),
            ]
        if with_warm:
            warm = live.get("warm") or {}
            last = warm.get("last_wake_s")
            cells += [
                _fmt(warm.get("asleep")),
                _fmt(warm.get("wakes")),
                "-" if last is None else f"{last:.2f}s",
            ]
        lines.append(cells)
    return headers, lines


def _narrow_columns(table: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The default columns, within 100 characters for names of a usual length: with live
    values, DESIRED and MODE are the scaler's now, and the one signal every model has."""
    headers = ["NAMESPACE", "NAME", "DESIRED", "READY", "MODE", "REASON"]
    with_pool = any(r.get("pool") for r in table)
    if with_pool:
        headers.insert(2, "POOL")
    with_live = any("live" in r for r in table)
    if with_live:
        headers += ["LIVE-REASON", "CONCURRENCY"]
    with_warm = any("warm" in (r.get("live") or {}) for r in table)
    if with_warm:
        headers += ["ASLEEP"]
    lines = []
    for r in table:
        live = r.get("live") or {}
        desired = live.get("desired", r.get("desired")) if with_live else r.get("desired")
        mode = (live.get("mode") or r.get("mode")) if with_live else r.get("mode")
        cells = [_fmt(v) for v in (r.get("namespace"), r.get("name"), desired, r.get("ready"))]
        if with_pool:
            cells.insert(2, _fmt(r.get("pool")))
        cells += [_fmt(mode), _fmt(r.get("reason"))]
        if with_live:
            cells += [_fmt(live.get("reason")), _stable(live, "concurrency")]
        if with_warm:
            cells += [_fmt((live.get("warm") or {}).get("asleep"))]
        lines.append(cells)
    return headers, lines


def _stable(live: Mapping[str, Any], kind: str) -> str:
    got = (live.get("signals") or {}).get(kind) or {}
    return _fmt(got.get("stable"))


def render_table(
    table: Sequence[Mapping[str, Any]],
    *,
    wide: bool = False,
    pools: list[dict[str, Any]] | None = None,
) -> str:
    """The table (``wide``: every column, as ``-o wide``), then the lines under it
    (``pools``: the opted-in InferencePools' rows, :func:`scaler.status.pools.pool_rows`)."""
    if not table:
        return "\n".join(pool_lines(pools or [])[1:])
    headers, lines = _wide_columns(table) if wide else _narrow_columns(table)
    with_live = any("live" in r for r in table)
    widths = [max(len(h), *(len(c[i]) for c in lines)) for i, h in enumerate(headers)]
    text = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    text += [
        "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        for cells in lines
    ]
    text += pool_lines(pools or [])
    text += under_table_lines(table)
    if with_live:
        text += ["", *textwrap.wrap(_LEGEND + ("" if wide else _NARROW_LEGEND), 100)]
        if wide:
            text += textwrap.wrap(_WIDE_LEGEND, 100)
    text += problem_lines(table)
    return "\n".join(text)
