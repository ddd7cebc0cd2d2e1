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
held as for one with no ready replica, and its activation wakes one. Which
endpoints sleep is the scaler's word, kept once for the whole activator
(:mod:`activator.holding.scaler_word`): this module asks for it (``asleep``)
each time it works out the ready set, and keeps no copy.

:class:`TargetEndpoints` keeps the ready set as a tuple swapped whole on every
change (readers never see it half-updated), and tells its owner of each
change through the one callback it was given (``on_change``): the target,
which hands endpoints to held requests in their order and wakes whoever
waits for a ready replica. Nothing here waits.
"""

from __future__ import annotations

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

    @property
    def ready(self) -> bool:
        """Up by the source or a probe, not marked down, not going away (asleep or not:
        :class:`TargetEndpoints` leaves the sleeping out of its ready set)."""
        return not self.down and not self.draining and (self.source_ready or self.probe_ok)

    def __repr__(self) -> str:
        return f"EndpointTracker({self.key}, ready={self.ready}, in_flight={self.in_flight})"


def _awake(_key: str) -> bool:
    return False


class TargetEndpoints:
    """The endpoints of one target and which of them are ready."""

    def __init__(
        self,
        name: str,
        *,
        on_change: Callable[[], None] | None = None,
        asleep: Callable[[str], bool] = _awake,
    ) -> None:
        self.name = name
        self.trackers: dict[str, EndpointTracker] = {}
        self.ready: tuple[EndpointTracker, ...] = ()
        self._on_change = on_change
        # Whether the endpoint ``ip:port`` sleeps: the scaler's word, asked, not copied.
        self._asleep = asleep

    def update(self, endpoints: Iterable[Endpoint]) -> None:
        """Take the source's latest list: add, drop, and refresh source readiness."""
        fresh: dict[str, EndpointTracker] = {}
        for ep in endpoints:
            tracker = self.trackers.get(ep.key)
            if tracker is None:
                tracker = EndpointTracker(ep)
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
        self.recompute()

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
        self.recompute()

    def mark_down(self, tracker: EndpointTracker) -> None:
        """A connection to this endpoint was refused: out of rotation until a probe succeeds."""
        if tracker.down and not tracker.probe_ok:
            return
        tracker.down = True
        tracker.probe_ok = False
        if self.trackers.get(tracker.key) is tracker:
            self.recompute()

    def recompute(self) -> None:
        """Work out the ready set again (also when the scaler's word on sleeping changed);
        ``on_change`` when it changed."""
        asleep = self._asleep
        ready = tuple(t for t in self.trackers.values() if t.ready and not asleep(t.key))
        if ready == self.ready:
            return
        self.ready = ready
        if self._on_change is not None:
            self._on_change()
