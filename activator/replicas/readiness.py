"""Which of a target's endpoints can take a request now, and waiting for one.

Each endpoint has an :class:`EndpointTracker`: mutable, one per address, kept
across source snapshots so its in-flight count survives a re-list. An
endpoint is *ready* when it is not marked down and either the source says so
(EndpointSlice ``ready``) or the last direct probe reached it. The probe
lets a held request go out the moment a cold replica starts listening,
before the EndpointSlice controller catches up (Knative's activator does the
same); in routes-file mode it is the only signal. A refused connection marks
an endpoint down at once, so no further request is sent there until a probe
succeeds again. A *draining* endpoint (the source says it is going away:
EndpointSlice ``terminating``) is never ready, whatever a probe finds; the
requests already there finish. A *sleeping* endpoint (the leading scaler's
answer lists it: the warm tier put it to sleep, or is about to, or is waking
it) is never ready either: a request for a model whose replicas all sleep is
held as for one with no ready replica, and its activation wakes one.

:class:`TargetEndpoints` keeps the ready set as a tuple swapped whole on every
change (readers never see it half-updated) and an :class:`asyncio.Event`
that is set and *replaced* on each change, as KEDA's ready-endpoints cache
wakes its waiters. :meth:`TargetEndpoints.wait_ready` ends in one of:

- ``True`` at once when a ready endpoint already exists;
- ``True`` as soon as a change leaves one ready;
- ``False`` when ``timeout_s`` passes first;
- ``CancelledError`` when the caller is cancelled.

Requests themselves do not wait here: the target's gate
(:mod:`activator.holding.gate`) builds its ``TargetEndpoints`` with an
``on_change`` callback and hands endpoints to held requests in their order
from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from activator.targets import Endpoint

__all__ = ["EndpointTracker", "TargetEndpoints"]


class EndpointTracker:
    """Live state of one endpoint of one target."""

    __slots__ = (
        "base_url",
        "down",
        "draining",
        "host",
        "in_flight",
        "key",
        "label",
        "port",
        "probe_ok",
        "sleeping",
        "source_ready",
    )

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port
        self.key = endpoint.key
        self.label = endpoint.label
        self.base_url = f"http://{self.key}"
        self.in_flight = 0
        self.source_ready = endpoint.ready
        self.probe_ok = False
        self.down = False
        self.draining = endpoint.draining
        self.sleeping = False

    @property
    def ready(self) -> bool:
        return (
            not self.down
            and not self.draining
            and not self.sleeping
            and (self.source_ready or self.probe_ok)
        )

    def __repr__(self) -> str:
        return f"EndpointTracker({self.key}, ready={self.ready}, in_flight={self.in_flight})"


class TargetEndpoints:
    """The endpoints of one target, their readiness, and a way to wait for one."""

    def __init__(self, name: str, *, on_change: Callable[[], None] | None = None) -> None:
        self.name = name
        self.trackers: dict[str, EndpointTracker] = {}
        self.ready: tuple[EndpointTracker, ...] = ()
        self._changed = asyncio.Event()
        self._on_change = on_change

    def update(self, endpoints: Iterable[Endpoint], sleeping: frozenset[str] = frozenset()) -> None:
        """Take the source's latest list: add, drop, and refresh source readiness;
        ``sleeping``: the keys asleep (the target's, which owns that list)."""
        fresh: dict[str, EndpointTracker] = {}
        for ep in endpoints:
            tracker = self.trackers.get(ep.key)
            if tracker is None:
                tracker = EndpointTracker(ep)
                tracker.sleeping = ep.key in sleeping
            else:
                if tracker.source_ready and not ep.ready:
                    # The source withdrew readiness (failing readiness probe):
                    # an old probe success must not keep it in rotation.
                    tracker.probe_ok = False
                tracker.source_ready = ep.ready
                tracker.draining = ep.draining
                tracker.label = ep.label
            fresh[ep.key] = tracker
        self.trackers = fresh
        self._recompute()

    def set_sleeping(self, keys: frozenset[str]) -> None:
        """The endpoints (``ip:port``) the warm tier has asleep; the others are awake."""
        changed = False
        for key, tracker in self.trackers.items():
            asleep = key in keys
            if tracker.sleeping != asleep:
                tracker.sleeping = asleep
                changed = True
        if changed:
            self._recompute()

    def set_probe_result(self, key: str, ok: bool) -> None:
        tracker = self.trackers.get(key)
        if tracker is None or tracker.draining:
            return
        if ok:
            if tracker.probe_ok and not tracker.down:
                return
            tracker.probe_ok = True
            tracker.down = False
        else:
            if not tracker.probe_ok and (tracker.down or not tracker.source_ready):
                return
            tracker.probe_ok = False
            # A source-ready endpoint that a probe cannot reach is down until
            # a probe reaches it again.
            tracker.down = tracker.source_ready
        self._recompute()

    def mark_down(self, tracker: EndpointTracker) -> None:
        """A connection to this endpoint was refused: out of rotation until a probe succeeds."""
        if tracker.down and not tracker.probe_ok:
            return
        tracker.down = True
        tracker.probe_ok = False
        if self.trackers.get(tracker.key) is tracker:
            self._recompute()

    def _recompute(self) -> None:
        ready = tuple(t for t in self.trackers.values() if t.ready)
        if ready == self.ready:
            return
        self.ready = ready
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        if self._on_change is not None:
            self._on_change()

    async def wait_ready(self, timeout_s: float | None) -> bool:
        """Wait until a ready endpoint exists; see the module docstring for outcomes."""
        try:
            async with asyncio.timeout(timeout_s):
                while not self.ready:
                    await self._changed.wait()
        except TimeoutError:
            return bool(self.ready)
        return True
