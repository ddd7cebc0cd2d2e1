"""One store of Events, two API groups: core ``v1`` and ``events.k8s.io/v1``.

The real server keeps a single Event type and serves it in both groups; an
Event written through one is visible through the other. The store holds core
``v1`` Events; requests to ``events.k8s.io/v1`` are converted on the way in
and out with the real field mapping (``pkg/apis/events/v1`` conversion):

    events.k8s.io/v1          core v1
    note                      message
    regarding                 involvedObject
    related                   related
    reportingController       reportingComponent
    reportingInstance         reportingInstance
    deprecatedSource          source            (component, host)
    deprecatedFirstTimestamp  firstTimestamp
    deprecatedLastTimestamp   lastTimestamp
    deprecatedCount           count
    eventTime, series, action, reason, type: same name

Field selectors written against the events.k8s.io names are translated too.
"""

from __future__ import annotations

from typing import Any

__all__ = ["core_to_events", "events_field_selector", "events_to_core"]

# (events.k8s.io name, core name)
_FIELDS = (
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("action", "action"),
    ("reason", "reason"),
    ("type", "type"),
)
_TO_CORE = dict(_FIELDS)


def core_to_events(core: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": core.get("metadata", {}),
    }
    for new, old in _FIELDS:
        if old in core and core[old] is not None:
            value = core[old]
            if old == "series" and isinstance(value, dict):
                # core series also carries the deprecated ``state``; events/v1 does not.
                value = {k: v for k, v in value.items() if k != "state"}
            out[new] = value
    return out


def events_to_core(event: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": event.get("metadata", {}),
    }
    for new, old in _FIELDS:
        if new in event and event[new] is not None:
            out[old] = event[new]
    return out


def events_field_selector(text: str | None) -> str | None:
    """Rewrite an events.k8s.io field selector (``regarding.name=x``) to core names."""
    if not text:
        return text
    parts = []
    for part in text.split(","):
        for new, _old in _FIELDS:
            if part.startswith((new + ".", new + "=", new + "!")):
                part = _TO_CORE[new] + part[len(new) :]
                break
        parts.append(part)
    return ",".join(parts)
