"""What every resource handler shares: the store, the open watches, and the Events view.

Main decision: ``events.k8s.io/v1`` Events are stored as core ``v1`` Events
(one store, as in the real server); the handlers reach storage only through
:meth:`ResourceContext.storage_type` and convert at the edge with
:meth:`~ResourceContext.to_wire` / :meth:`~ResourceContext.from_wire`, so
the conversion lives in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from loadtests.sandbox.cluster import events_conversion
from loadtests.sandbox.cluster.apiserver.open_watches import OpenWatches
from loadtests.sandbox.cluster.resources import ResourceType, by_group_version_plural
from loadtests.sandbox.cluster.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from loadtests.sandbox.cluster.store import Store

__all__ = ["ResourceContext"]

Obj = dict[str, Any]

_EVENTS_GROUP = "events.k8s.io"


@dataclass(frozen=True, slots=True)
class ResourceContext:
    """What the resource handlers share (one per :class:`ApiServer`), fixed once made:
    the store, the open watch streams (their own owner), the bookmark interval."""

    store: Store
    watches: OpenWatches
    bookmark_interval_s: float
    _core_events: ResourceType | None = field(
        init=False, default_factory=lambda: by_group_version_plural("", "v1", "events")
    )

    def storage_type(self, rtype: ResourceType) -> ResourceType:
        if self.is_events_group(rtype) and self._core_events:
            return self._core_events
        return rtype

    @staticmethod
    def is_events_group(rtype: ResourceType) -> bool:
        return rtype.group == _EVENTS_GROUP and rtype.plural == "events"

    def to_wire(self, rtype: ResourceType, obj: Obj) -> Obj:
        if self.is_events_group(rtype):
            return events_conversion.core_to_events(obj)
        return obj

    def from_wire(self, rtype: ResourceType, obj: Obj) -> Obj:
        if self.is_events_group(rtype):
            return events_conversion.events_to_core(obj)
        return obj

    def printed_form(self, rtype: ResourceType) -> Callable[[Obj], Obj] | None:
        if self.is_events_group(rtype):
            return events_conversion.events_to_core
        return None

    def selectors(
        self, request: web.Request, rtype: ResourceType
    ) -> tuple[LabelSelector, FieldSelector]:
        labels = parse_label_selector(request.query.get("labelSelector"))
        field_text = request.query.get("fieldSelector")
        if self.is_events_group(rtype):
            field_text = events_conversion.events_field_selector(field_text)
        return labels, parse_field_selector(field_text)
