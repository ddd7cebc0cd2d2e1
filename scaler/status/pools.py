"""``tidal status``'s InferencePools: each opted-in pool beside the Deployment it scales.

A pool is not a row of the table (the Deployment it scales is, with its
name in the POOL column); under the table, one line per opted-in pool says
what it scales, or why it scales nothing (no Deployment selected, several,
one shared with another pool), and, with ``--scaler-url``, what the
scaler reads from its endpoint picker now: requests queued (by priority
when more than one band holds some), running, ready endpoints, and the
requests the picker turned away for want of an endpoint since the scaler
began reading it (misses: each waited out the picker's
``noEndpointRequestTTL`` for a cold start, or found its band full with no
endpoint). docs/gateway-api.md explains each.

Main decision: the pool's own view comes from the same pool index the
scaler runs (:mod:`scaler.kube.pool_index`), so ``tidal status`` can never
say a pool scales a Deployment the scaler does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaler.kube.types import PoolState

__all__ = ["pool_lines", "pool_rows"]


def _selector(state: PoolState) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(state.pool.selector.items())) or "(empty)"


def pool_rows(
    states: Mapping[str, PoolState], live: Mapping[str, Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One row per opted-in pool: what it scales or why not, and live its picker's figures
    (from the scaler's view of the Deployment it scales)."""
    out = []
    for _, state in sorted(states.items()):
        pool = state.pool
        row: dict[str, Any] = {
            "kind": "InferencePool",
            "namespace": pool.namespace,
            "name": pool.name,
            "selector": dict(pool.selector),
            "picker": f"{pool.picker[0]}:{pool.picker[1]}" if pool.picker else None,
            "scales": state.bound_to,
        }
        if not state.listed:
            row["problem"] = "its namespace's Deployments are not listed yet"
        elif state.bound_to is None and not state.selected:
            row["problem"] = f"selector {_selector(state)} matches no Deployment: nothing scaled"
        elif state.bound_to is None and len(state.selected) > 1:
            names = ", ".join(state.selected)
            row["problem"] = f"selector matches several Deployments ({names}): none scaled"
        elif state.bound_to is None:
            others = ", ".join(state.shared_with)
            row["problem"] = f"{state.selected[0]} is also selected by {others}: none scaled"
        if live is not None and state.bound_to is not None:
            observed = (live.get(state.bound_to) or {}).get("observed") or {}
            row["live"] = {k: v for k, v in observed.items() if k.startswith("epp_")}
        out.append(row)
    return out


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def _live_text(live: Mapping[str, Any]) -> str:
    if not live:
        return "; its picker not read yet"
    bands = sorted(
        (int(k.rsplit("_", 1)[1]), v)
        for k, v in live.items()
        if k.startswith("epp_queued_requests_priority_") and v
    )
    queued = _figure(live.get("epp_queued_requests")) + " queued"
    if len(bands) > 1:
        queued += " (" + ", ".join(f"priority {p}: {v:g}" for p, v in reversed(bands)) + ")"
    return (
        f"; picker: {queued}, {_figure(live.get('epp_running_requests'))} running,"
        f" {_figure(live.get('epp_ready_endpoints'))} ready endpoints,"
        f" {_figure(live.get('epp_no_endpoint_misses'))} turned away for want of an"
        " endpoint (misses)"
    )


def pool_lines(table: list[dict[str, Any]]) -> list[str]:
    """The lines under the table, one per pool (none without pools)."""
    if not table:
        return []
    lines = ["", "InferencePools (each scales one Deployment; its endpoint picker):"]
    for row in table:
        head = f"{row['namespace']}/{row['name']}"
        picker = f" (picker {row['picker']})" if row["picker"] else " (no picker Service)"
        if row.get("problem"):
            lines.append(f"{head}: {row['problem']}")
            continue
        text = f"{head} -> {row['scales']}{picker}"
        if "live" in row:
            text += _live_text(row["live"])
        lines.append(text)
    return lines
