"""The ``autoscaling.tidal.dev/status`` annotation's document (docs/annotations.md).

A JSON object ``{"desired", "mode", "onDemand", "spot", "reason",
"lastChangeTime"}`` that the leader writes on the Deployment and ``tidal
status`` reads back; with an objective (``slo-ttft``) also ``"binding"``
(the phase, prefill or decode, whose work is the larger) and
``"nextReplica"`` (the share of requests one more replica would meet
besides, as at that write: what the next replica would buy).

Main decision, when to write: only its *discrete* content (desired, mode,
split, reason) is compared, never the time, so a decision that changes
nothing rewrites nothing, and a scaler that restarts and decides as its
predecessor did leaves the annotation alone. The reason and the change time
move only with an actual change of the scale; a decision that keeps the scale
carries the previous reason and time forward, and before Tidal ever changed
the scale (a new model, or one whose annotations were invalid from the
start) the reason and time are ``null``, not the policy's ``Steady``: the
reason says why the scale last *changed*.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from scaler.policy.api import Decision

__all__ = ["StatusDocument", "encode_status", "parse_status", "same_status", "status_document"]

StatusDocument = dict[str, Any]

_DISCRETE = ("desired", "mode", "onDemand", "spot", "reason")


def parse_status(raw: str | None) -> StatusDocument | None:
    """The document in an annotation's value; ``None`` when absent or not a JSON object."""
    if not raw:
        return None
    try:
        got = json.loads(raw)
    except ValueError:
        return None
    return got if isinstance(got, dict) else None


def _core(status: Mapping[str, Any] | None) -> tuple[Any, ...]:
    if status is None:
        return ()
    return tuple(status.get(k) for k in _DISCRETE)


def same_status(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """True when ``a`` and ``b`` say the same (the change time aside)."""
    return _core(a) == _core(b)


def status_document(
    decision: Decision,
    previous: Mapping[str, Any] | None,
    *,
    changed: bool,
    now_wall: str,
    last_change_wall: str | None = None,
    split: tuple[int, int] | None = None,
) -> StatusDocument:
    """The document for ``decision``. ``changed``: this decision changed the scale, so
    its reason and ``now_wall`` are recorded; otherwise the previous reason and time
    stay (``last_change_wall``, else ``now_wall``, when there was no time), and with
    no previous reason both are ``null``: Tidal has not changed the scale. ``split``:
    ``(on_demand, spot)`` replicas asked of each capacity type (``None``: all on demand)."""
    before = previous or {}
    reason: str | None
    when: str | None
    if changed:
        reason, when = decision.reason.value, now_wall
    elif before.get("reason") is not None:
        reason = before["reason"]
        when = before.get("lastChangeTime") or last_change_wall or now_wall
    else:
        # Tidal has not changed this scale (yet): no reason for a change to show.
        reason, when = None, last_change_wall
    document: StatusDocument = {
        "desired": decision.desired,
        "mode": decision.mode.value,
        "onDemand": decision.desired if split is None else split[0],
        "spot": 0 if split is None else split[1],
        "reason": reason,
        "lastChangeTime": when,
    }
    if decision.slo is not None:
        # SLO-first scaling: the phase that binds and what one more replica would
        # meet besides (a share of requests), as at this write.
        document["binding"] = decision.slo.binding
        document["nextReplica"] = round(decision.slo.next_replica, 4)
    return document


def encode_status(status: Mapping[str, Any]) -> str:
    """The annotation value: compact JSON."""
    return json.dumps(status, separators=(",", ":"))
