"""``tidal status``'s rows: one per Deployment, from the API server and, live, the scaler.

A row holds what the status annotation says (desired, the split, mode, the
reason of the last change), the Deployment's own state, and what the
scaler's parsers make of its annotations: the same parsers, so that a
Deployment the scaler leaves alone for a bad annotation says why here, and
one an InferencePool scales is read with the pool's annotations under its
own, as the scaler reads it. A spot pair's READY is both halves'; a model
with GPU shapes counts its shapes' companions ``<name>-<shape>`` too, and its
row's ``shapes`` holds the replicas asked of each shape, their hourly cost
and each Deployment's Ready replicas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from scaler.kube.types import STATUS_ANNOTATION, CompanionInfo, DeploymentInfo, PoolInfo
from scaler.policy.annotations import parse_scaling_config
from scaler.policy.invalid_annotation import InvalidAnnotation
from scaler.policy.known_keys import unknown_keys
from scaler.policy.placement.companion import companion_name
from scaler.policy.pool_annotations import merge
from scaler.policy.routing_check import routing_problems
from scaler.policy.shapes.declarations import is_shape_key

__all__ = ["rows", "spot_policy"]


def _status(d: DeploymentInfo) -> dict[str, Any]:
    raw = d.annotations.get(STATUS_ANNOTATION)
    if not raw:
        return {}
    try:
        got = json.loads(raw)
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def rows(
    deployments: Sequence[DeploymentInfo],
    live: Mapping[str, Mapping[str, Any]] | None = None,
    companions: Mapping[str, CompanionInfo] | None = None,
    pools: Mapping[str, PoolInfo] | None = None,
    shape_companions: Mapping[str, Mapping[str, CompanionInfo]] | None = None,
) -> list[dict[str, Any]]:
    """One row per Deployment: API state, plus live values when ``live`` is given.

    ``companions`` (by ``namespace/name`` of the user's Deployment) adds the
    spot half of a pair to READY and to the row's ``pair``; ``pools`` (by the
    same key) names the InferencePool that scales it, whose annotations are
    read under the Deployment's, as the scaler reads them; ``shape_companions``
    (the same, then by shape) the shapes' companions to READY and to ``shapes``.
    """
    out = []
    for d in deployments:
        pool = (pools or {}).get(d.key)
        if pool is not None:
            d = replace(d, annotations=merge(pool.annotations, d.annotations).annotations)
        st = _status(d)
        row: dict[str, Any] = {
            "namespace": d.namespace,
            "name": d.name,
            "replicas": d.spec_replicas,
            "ready": d.ready_replicas,
            "desired": st.get("desired"),
            "on_demand": st.get("onDemand"),
            "spot": st.get("spot"),
            "mode": st.get("mode"),
            "reason": st.get("reason"),
            "last_change": st.get("lastChangeTime"),
        }
        if pool is not None:
            row["pool"] = pool.name
        # The scaler leaves a Deployment with a bad annotation alone, so its
        # status annotation goes stale: say why here, from the same parser.
        try:
            config = parse_scaling_config(d.annotations)
        except InvalidAnnotation as exc:
            row["reason"] = "InvalidAnnotation"
            row["problem"] = str(exc)
            policy = "on-demand"
        else:
            policy = config.placement.policy
            if config.slo_ttft_s is not None:
                row["slo"] = {"ttft_s": config.slo_ttft_s, "attainment": config.slo_attainment}
        routing = routing_problems(d.annotations)
        if routing:
            row["routing_problem"] = "; ".join(str(p) for p in routing)
        unknown = [p for p in unknown_keys(d.annotations) if not is_shape_key(p.key)]
        if unknown:
            row["unknown_keys"] = "; ".join(str(p) for p in unknown)
        companion = (companions or {}).get(d.key)
        if policy != "on-demand" or companion is not None:
            spot_ready = companion.ready_replicas if companion is not None else 0
            row["ready"] = d.ready_replicas + spot_ready
            row["pair"] = {
                "policy": policy,
                "on_demand": {"deployment": d.name, "ready": d.ready_replicas},
                "spot": {
                    "deployment": companion.name if companion else companion_name(d.name),
                    "exists": companion is not None,
                    "ready": spot_ready,
                },
            }
        shaped = _shapes(d, st, (shape_companions or {}).get(d.key) or {})
        if shaped is not None:
            row["ready"] += sum(shaped["ready"].values()) - d.ready_replicas
            row["shapes"] = shaped
        if live is not None:
            row["live"] = _live_row(live.get(d.key) or {})
        out.append(row)
    return out


def _live_row(view: Mapping[str, Any]) -> dict[str, Any]:
    """The row's ``live`` part: what the scaler's /v1/targets says of the model now."""
    out: dict[str, Any] = {
        "desired": view.get("desired"),
        "mode": view.get("mode"),
        "reason": view.get("reason"),
        "signals": view.get("signals") or {},
        "observed": view.get("observed") or {},
        "cost": view.get("cost"),
    }
    for key in ("slo", "shapes"):
        part = view.get(key)
        if isinstance(part, Mapping):
            out[key] = dict(part)
    warm = view.get("warm")
    if isinstance(warm, Mapping):
        pods = warm.get("pods") or {}
        out["warm"] = {
            "asleep": sum(
                1 for p in pods.values() if isinstance(p, Mapping) and p.get("phase") == "sleeping"
            ),
            "wakes": warm.get("wakes"),
            "sleeps": warm.get("sleeps"),
            "failed_wakes": warm.get("failedWakes"),
            "last_wake_s": warm.get("lastWakeSeconds"),
            "sleep_mode_unavailable": warm.get("sleepModeUnavailable"),
        }
    return out


def _shapes(
    d: DeploymentInfo, status: Mapping[str, Any], companions: Mapping[str, CompanionInfo]
) -> dict[str, Any] | None:
    """A model's shapes: replicas asked of each and their cost (the status annotation),
    each of its Deployments' Ready replicas (None: it has no shapes)."""
    if not companions and "shapes" not in status:
        return None
    return {
        "replicas": status.get("shapes") or {},
        "cost_per_hour": status.get("costPerHour"),
        "ready": {d.name: d.ready_replicas}
        | {c.name: c.ready_replicas for _, c in sorted(companions.items())},
    }


def spot_policy(d: DeploymentInfo) -> bool:
    try:
        return parse_scaling_config(d.annotations).placement.policy != "on-demand"
    except InvalidAnnotation:
        return False
