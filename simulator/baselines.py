"""The baselines Tidal is measured against, each as its own documentation describes it.

All of them size on the same signal (requests held plus in flight, sampled
each second) and the same per-replica target, so that the scaling
algorithms can be compared. What else differs is each project's own
default, traced here line by line to its documentation or source:

- :class:`AlwaysOn`: a fixed fleet, warm from the start. The runner picks
  the smallest count that meets the SLO for 99 % of requests, and says so
  when no fleet up to the ceiling does.
- :class:`Hpa`: the Kubernetes Horizontal Pod Autoscaler
  (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/):
  ``desired = ceil(current x currentMetric / targetMetric)`` every 15 s
  (``--horizontal-pod-autoscaler-sync-period``), no change within a 10 %
  tolerance, not-ready pods counted as using nothing when scaling up; the
  default ``behavior``: scale-down stabilization 300 s (the highest
  recommendation of the last 5 minutes), scale-up at most +100 % or +4 pods
  per 15 s (whichever is more), scale-down at most -100 % per 15 s; at least
  one replica (``minReplicas`` defaults to 1). The metric is a Pods metric
  (concurrency per pod, through a metrics adapter), read as the mean over
  the last sync period. No proxy holds requests: a pod is always up.
- :class:`Keda`: KEDA with its HTTP add-on
  (https://keda.sh/docs/2.16/reference/scaledobject-spec/ and
  https://github.com/kedacore/http-add-on/blob/main/docs/ref/v0.8.0/http_scaled_object.md):
  the add-on's interceptor holds requests while the app is at zero and its
  external *push* scaler reports activity at once, so KEDA activates 0 -> 1
  without waiting for a poll; above that the HPA it creates scales on the
  interceptor's concurrency, an **External metric with an AverageValue
  target**: ``desired = ceil(metric / target)`` against the replicas the
  Deployment asks for, ready or not (the HPA's readiness rules apply only
  to Pods and Resource metrics), so KEDA scales during a cold start (HPA
  tolerance, stabilization and rate limits as above, ``minReplicas`` 1);
  back to zero when no request has been seen for the ``cooldownPeriod``
  (300 s) at a ``pollingInterval`` (30 s) check. The interceptor gives a
  held request up after :data:`KEDA_HOLD_TIMEOUT_S` (20 s: the Helm chart's
  ``interceptor.replicas.waitTimeout``, the documented install; the binary's
  own default, ``KEDA_CONDITION_WAIT_TIMEOUT``, is 1.5 s, in
  ``interceptor/config/timeouts.go``).
- :class:`Knative`: Knative Serving's KPA
  (https://knative.dev/docs/serving/autoscaling/ and
  ``pkg/autoscaler/scaling/autoscaler.go``): decisions every 2 s; stable
  window 60 s, panic window 10 % of it (6 s); both averages are rounded up
  to whole pods first (``ceil(observed / target)``), then kept within the
  rate limits (max scale-up rate 1000, max scale-down rate 2 over the ready
  pods); panic when the *rounded* panic count reaches 200 % of the ready
  pods; in panic the count is the larger of the panic and stable counts
  and never below the highest seen in this panic, which ends once a stable
  window passes without a crossing; ``scale-down-delay`` 0 s (a window
  maximum over the delay when set); the activator holds requests at zero and
  pokes the autoscaler; scale to zero once the stable window wants zero and
  then the ``scale-to-zero-grace-period`` (30 s) has passed. The activator
  holds a request for up to the revision's request timeout,
  :data:`KNATIVE_HOLD_TIMEOUT_S` (``revision-timeout-seconds`` 300 s in
  ``config-defaults``). Knative's ``container-concurrency-target-percentage``
  (70 % by default) is set to 100 % so that its per-replica target equals
  the others'. ``knative-tidal-idle`` is the same KPA with Tidal's idle
  settings (grace 5 min, scale-down delay 60 s) instead of Knative's (30 s,
  0 s), so that a comparison of the algorithms alone is at hand.
- the planner (Dynamo's SLA planner) is :mod:`simulator.planner`.

Tidal itself is :class:`simulator.tidal.TidalAutoscaler` (the real policy).
"""

from __future__ import annotations

import math
from collections import deque

from simulator.world import View

__all__ = [
    "HOLD_TIMEOUTS_S",
    "KEDA_HOLD_TIMEOUT_S",
    "KNATIVE_HOLD_TIMEOUT_S",
    "AlwaysOn",
    "Hpa",
    "Keda",
    "Knative",
    "RecentMean",
]

_EPSILON = 1e-9

#: How long each baseline's proxy holds a request while nothing is ready
#: (see the module docstring); the others hold as Tidal's activator does.
KEDA_HOLD_TIMEOUT_S = 20.0
KNATIVE_HOLD_TIMEOUT_S = 300.0
HOLD_TIMEOUTS_S = {
    "keda-http": KEDA_HOLD_TIMEOUT_S,
    "knative-kpa": KNATIVE_HOLD_TIMEOUT_S,
    "knative-tidal-idle": KNATIVE_HOLD_TIMEOUT_S,
}


def _ceil(x: float) -> int:
    return max(0, math.ceil(x - _EPSILON))


class RecentMean:
    """Mean of the last ``window_s`` one-second samples (fewer at the start)."""

    def __init__(self, window_s: float) -> None:
        if window_s < 1:
            raise ValueError(f"window must be at least 1 s, got {window_s}")
        self.size = int(window_s)
        self.values: deque[float] = deque()
        self.total = 0.0

    def add(self, value: float) -> None:
        self.values.append(value)
        self.total += value
        if len(self.values) > self.size:
            self.total -= self.values.popleft()

    @property
    def mean(self) -> float:
        if not self.values:
            return 0.0
        # Re-summing when the running sum drifts below zero keeps an idle
        # window at exactly 0 (float residue must not read as load).
        return max(0.0, self.total) / len(self.values)


class AlwaysOn:
    """A fixed fleet of ``replicas``, warm from time 0, never scaled."""

    def __init__(self, replicas: int) -> None:
        if replicas < 1:
            raise ValueError(f"an always-on fleet needs at least 1 replica, got {replicas}")
        self.replicas = replicas

    @property
    def name(self) -> str:
        return f"always-on-{self.replicas}"

    @property
    def initial(self) -> int:
        return self.replicas

    def tick(self, view: View, *, activation: bool) -> int | None:
        return None


class _HpaCore:
    """The HPA's replica calculation and default behavior (see the module docstring)."""

    def __init__(
        self,
        *,
        target: float,
        min_replicas: int,
        max_replicas: int,
        sync_s: float = 15.0,
        tolerance: float = 0.1,
        scale_down_stabilization_s: float = 300.0,
        external: bool = False,
    ) -> None:
        if target <= 0:
            raise ValueError(f"the per-replica target must be > 0, got {target}")
        self.target = target
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.sync_s = sync_s
        self.tolerance = tolerance
        self.stabilization_s = scale_down_stabilization_s
        # External metric with an AverageValue target (KEDA): sized on the
        # metric's total over the replicas asked for, ready or not.
        self.external = external
        self.metric = RecentMean(sync_s)
        self.recommendations: deque[tuple[float, int]] = deque()
        self.next_sync_s = 0.0

    def reset(self, now: float) -> None:
        self.recommendations.clear()
        self.next_sync_s = now

    def observe(self, concurrency: float) -> None:
        self.metric.add(concurrency)

    def due(self, now: float) -> bool:
        return now >= self.next_sync_s

    def sync(self, view: View) -> int:
        now = view.now
        self.next_sync_s = now + self.sync_s
        current = view.spec
        total = self.metric.mean
        recommended = current
        if self.external:
            if current > 0:
                ratio = total / (self.target * current)
                if abs(ratio - 1) > self.tolerance:
                    recommended = _ceil(total / self.target)
        elif view.ready > 0:
            ratio = total / (self.target * view.ready)
            if abs(ratio - 1) > self.tolerance:
                recommended = _ceil(ratio * view.ready)
                unready = max(0, current - view.ready)
                if unready and recommended > current:
                    # Scaling up: pods not ready yet count as using nothing.
                    ratio = total / (self.target * (view.ready + unready))
                    if ratio <= 1 + self.tolerance:
                        recommended = current
                    else:
                        recommended = _ceil(ratio * (view.ready + unready))
        # Scale-down stabilization: the highest recommendation of the window.
        self.recommendations.append((now, recommended))
        while self.recommendations and self.recommendations[0][0] <= now - self.stabilization_s:
            self.recommendations.popleft()
        desired = recommended
        if desired < current:
            desired = min(current, max(r for _, r in self.recommendations))
        # Default scale-up policy: +100 % or +4 pods per period, the larger.
        desired = min(desired, max(2 * current, current + 4))
        return min(max(desired, self.min_replicas), self.max_replicas)


class Hpa:
    """The Kubernetes HPA with its defaults; never below one replica."""

    def __init__(self, *, target: float, max_replicas: int, min_replicas: int = 1) -> None:
        if min_replicas < 1:
            raise ValueError("the HPA cannot scale to zero: min_replicas must be >= 1")
        self.core = _HpaCore(target=target, min_replicas=min_replicas, max_replicas=max_replicas)
        self._initial = min_replicas

    @property
    def name(self) -> str:
        return "hpa"

    @property
    def initial(self) -> int:
        return self._initial

    def tick(self, view: View, *, activation: bool) -> int | None:
        if activation:
            return None  # never at zero
        self.core.observe(view.concurrency)
        if not self.core.due(view.now):
            return None
        return self.core.sync(view)


class Keda:
    """KEDA + HTTP add-on: push activation from zero, HPA above one, cooldown to zero."""

    def __init__(
        self,
        *,
        target: float,
        max_replicas: int,
        polling_interval_s: float = 30.0,
        cooldown_s: float = 300.0,
    ) -> None:
        self.core = _HpaCore(
            target=target, min_replicas=1, max_replicas=max_replicas, external=True
        )
        self.polling_s = polling_interval_s
        self.cooldown_s = cooldown_s
        self.last_active_s = -math.inf
        self.next_poll_s = 0.0

    @property
    def name(self) -> str:
        return "keda-http"

    @property
    def initial(self) -> int:
        return 0

    def tick(self, view: View, *, activation: bool) -> int | None:
        now = view.now
        active = activation or view.busy or view.held > 0 or view.in_flight > 0
        if active:
            self.last_active_s = now
        if view.spec == 0:
            if active:
                self.core.reset(now)
                return 1
            return None
        if activation:
            return None
        self.core.observe(view.concurrency)
        if now >= self.next_poll_s:
            self.next_poll_s = now + self.polling_s
            if now - self.last_active_s >= self.cooldown_s:
                return 0
        if self.core.due(now):
            return self.core.sync(view)
        return None


class Knative:
    """Knative's KPA with its defaults (see the module docstring)."""

    def __init__(
        self,
        *,
        target: float,
        max_replicas: int,
        tick_s: float = 2.0,
        stable_window_s: float = 60.0,
        panic_window_percentage: float = 10.0,
        panic_threshold_percentage: float = 200.0,
        max_scale_up_rate: float = 1000.0,
        max_scale_down_rate: float = 2.0,
        scale_to_zero_grace_s: float = 30.0,
        scale_down_delay_s: float = 0.0,
        initial_scale: int = 1,
        name: str = "knative-kpa",
    ) -> None:
        self.target = target
        self.max_replicas = max_replicas
        self.tick_s = tick_s
        self.stable_window_s = stable_window_s
        self.stable = RecentMean(stable_window_s)
        self.panic = RecentMean(max(1.0, stable_window_s * panic_window_percentage / 100))
        self.panic_threshold = panic_threshold_percentage / 100
        self.up_rate = max_scale_up_rate
        self.down_rate = max_scale_down_rate
        self.grace_s = scale_to_zero_grace_s
        self.delay_s = scale_down_delay_s
        self.initial_scale = initial_scale
        self._name = name
        self.panic_since: float | None = None
        self.max_panic_pods = 0
        self.zero_wanted_since: float | None = None
        self.recent: deque[tuple[float, int]] = deque()  # (time, desired) within the delay
        self.next_tick_s = 0.0

    @property
    def name(self) -> str:
        return self._name

    @property
    def initial(self) -> int:
        return 0

    def tick(self, view: View, *, activation: bool) -> int | None:
        now = view.now
        if activation:
            # The activator's stat reaches the autoscaler at once.
            want = max(self.initial_scale, _ceil(view.held / self.target))
            return min(want, self.max_replicas)
        self.stable.add(view.concurrency)
        self.panic.add(view.concurrency)
        if now < self.next_tick_s:
            return None
        self.next_tick_s = now + self.tick_s
        current = view.spec
        ready = max(1, view.ready)
        max_up = math.ceil(self.up_rate * ready)
        max_down = math.floor(ready / self.down_rate)
        # Whole pods first, as autoscaler.go does (dspc, dppc), then the rate limits.
        stable_pods = _ceil(self.stable.mean / self.target)
        panic_pods = _ceil(self.panic.mean / self.target)
        stable_want = min(max(stable_pods, max_down), max_up)
        panic_want = min(max(panic_pods, max_down), max_up)
        if panic_pods / ready >= self.panic_threshold:
            self.panic_since = now
        elif self.panic_since is not None and now - self.panic_since > self.stable_window_s:
            self.panic_since = None
            self.max_panic_pods = 0
        if self.panic_since is not None:
            # Provision for the stable window too when it asks for more.
            desired = max(panic_want, stable_want, self.max_panic_pods)
            self.max_panic_pods = desired
        else:
            desired = stable_want
        desired = self._delayed(now, min(desired, self.max_replicas))
        if current == 0:
            return None if desired == 0 else desired
        if desired == 0:
            # Scale to zero waits for the grace period after zero is first wanted.
            if self.zero_wanted_since is None:
                self.zero_wanted_since = now
            if now - self.zero_wanted_since >= self.grace_s:
                self.zero_wanted_since = None
                return 0
            return current
        self.zero_wanted_since = None
        return desired

    def _delayed(self, now: float, desired: int) -> int:
        """``scale-down-delay``: the highest count wanted within the delay."""
        if self.delay_s <= 0:
            return desired
        self.recent.append((now, desired))
        while self.recent and self.recent[0][0] <= now - self.delay_s:
            self.recent.popleft()
        return max(d for _, d in self.recent)
