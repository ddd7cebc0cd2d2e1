"""A wake's backlog, sized as a backlog: what held requests ask for around a wake, pure.

While a target wakes from zero, every request that arrives is held, so the
concurrency the activators report is the backlog: it grows with the time
spent waiting (2 requests/s over a 10 s cold start hold 20), whatever the
load. Read as steady demand, backlog / target asks for replicas that arrive
a cold start later, after the first replicas have served it: 20 held at a
target of 4 per replica once asked for 4 replicas, three of which ran for
nothing. Once the first replica is ready the backlog is released onto it,
and the windows go on showing it, as in-flight requests, until it has
drained and then for a window after.

So from the decision that wakes a target, :class:`WakeBacklog` follows the
wake through three phases, and the count signals (concurrency, queue depth)
ask for what would still be needed once the first replicas are ready:

1. **waking** (none ready): no more than the replicas already asked for. The
   held requests are work for the replicas starting; nothing yet says how
   long a request takes, so nothing says what the arrivals will need.
2. **draining** (one ready, the backlog not yet served): the requests in the
   system, less the backlog, are the load: the latest concurrency sample, but
   no more than the requests that arrived since the first replica became
   ready. The backlog went out first, so while any of it is left every
   request that came after is still in the system, and once the latest
   sample is no more than those arrivals the backlog is gone (``drained_s``).
3. **settling** (a stable window after the drain): the panic window holds the
   drain's samples for one panic window (until then the latest sample, as in
   2, stands for both windows), the stable window for one stable window
   (until then it reads no more than the panic window).

Utilizations are the replicas' own and are left alone. A load that needs
more than the first replicas shows in phase 2 within seconds: the arrivals
since the first replica became ready grow at the arrival rate, and the ask
with them. Without counters of arrivals (no activator reports), phase 2 has
no bound but the latest sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scaler.policy.api import Observation, ScalingConfig, SignalKind

__all__ = ["WakeBacklog", "capped", "count_demand"]

_COUNTS = frozenset({SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH})


@dataclass(frozen=True, slots=True)
class WakeBacklog:
    """One wake, from the decision that woke the target until its backlog stops showing.

    ``ready_s`` and ``arrivals_at_ready``: when the first replica was seen
    ready, and the arrivals counter then; ``drained_s``: when the backlog was
    seen gone (None: not yet).
    """

    woke_s: float
    ready_s: float | None = None
    arrivals_at_ready: float | None = None
    drained_s: float | None = None

    @classmethod
    def start(cls, now: float) -> WakeBacklog:
        return cls(woke_s=now)

    def follow(
        self, observation: Observation, config: ScalingConfig, now: float
    ) -> WakeBacklog | None:
        """The wake as seen at ``now``: the first replica ready, the backlog drained;
        None once its samples have left the stable window (or the target went to zero)."""
        if observation.spec_replicas == 0:
            return None
        arrivals = None if observation.load is None else observation.load.arrivals
        wake = self
        if wake.ready_s is None:
            if observation.ready_replicas == 0:
                return wake
            if arrivals is None:
                return None  # nothing tells the backlog from new demand: the windows decide
            wake = replace(wake, ready_s=now, arrivals_at_ready=arrivals)
        if wake.drained_s is None:
            since = wake.arrivals_since_ready(arrivals)
            latest = observation.concurrency_now
            if latest is not None and since is not None and latest <= since:
                wake = replace(wake, drained_s=now)
            return wake
        if now - wake.drained_s >= config.window_s:
            return None
        return wake

    def arrivals_since_ready(self, arrivals: float | None) -> float | None:
        """Requests that arrived since the first replica was seen ready (None: not known)."""
        if arrivals is None or self.arrivals_at_ready is None:
            return None
        return max(0.0, arrivals - self.arrivals_at_ready)

    def phase(self, config: ScalingConfig, now: float) -> str:
        """``waking``, ``draining`` or ``settling`` (module docstring)."""
        if self.ready_s is None:
            return "waking"
        if self.drained_s is None or now - self.drained_s < config.panic_window_s:
            return "draining"
        return "settling"

    def why(self, config: ScalingConfig, now: float) -> str:
        """What the wake's phase does to the count signals, for the decision's message."""
        phase = self.phase(config, now)
        if phase == "waking":
            return "waking: the requests held are a backlog for the replicas starting"
        if phase == "draining":
            return "after a wake: the held backlog drains, sized on the requests since"
        return "after a wake: the stable window reads no more than the panic window"


def count_demand(
    kind: SignalKind,
    stable: float,
    panic: float | None,
    *,
    wake: WakeBacklog | None,
    observation: Observation,
    config: ScalingConfig,
    now: float,
) -> tuple[float, float | None, float | None]:
    """The stable and panic readings of ``kind`` with the wake's backlog taken out, and
    the most replicas it may ask for (None: no such bound). Outside a wake, and for
    utilizations, the readings as they are."""
    if wake is None or kind not in _COUNTS:
        return stable, panic, None
    phase = wake.phase(config, now)
    if phase == "waking":
        return stable, panic, float(observation.spec_replicas)
    if phase == "draining":
        arrivals = None if observation.load is None else observation.load.arrivals
        since = wake.arrivals_since_ready(arrivals)
        latest = observation.concurrency_now
        if since is None:  # the counters went away: the windows decide
            return stable, panic, None
        if kind is SignalKind.CONCURRENCY and latest is not None:
            load = min(latest, since)
        else:
            load = min(v for v in (stable, panic, since) if v is not None)
        return load, load, None
    if panic is None:
        return stable, panic, None
    return min(stable, panic), panic, None


def capped(want: int, cap: float | None) -> int:
    """``want`` no higher than ``cap`` replicas (None: no cap)."""
    return want if cap is None else min(want, max(0, math.floor(cap)))
