"""One decision for one target: the policy's inputs, its answer, and the writes it needs.

The controller decides when (ticks, activations, rechecks, pokes) and holds
each target's lock; :class:`Decider` does one step for one target:

1. reads the target's observation out of the signal hub (combined sources,
   and the windows read into signals; a signal is not fresh when any source
   behind it is stale);
2. counts ready and current replicas: with a spot companion, the whole pair
   (:func:`~scaler.placement.placer.pair_counts`);
3. calls the pure policy with the target's state and keeps the state it
   returns in the :class:`~scaler.targets.state.TargetLoop`;
4. with a :class:`~scaler.placement.placer.Placer`, splits the decided replicas
   between on-demand and spot (every replica plans, so a follower that takes
   over knows what is covered);
5. publishes the decision's gauges, and, on the leader only, turns it into a
   :class:`~scaler.actuator.WritePlan` for the actuator.

Main decisions:

- **A bad annotation leaves the Deployment alone**: no decision, and a plan
  with one ``InvalidAnnotation`` Warning Event per distinct set of
  annotations; no write touches its scale until the annotations change.
- **Failed writes back off, but not a wake from zero.** A target whose
  writes failed waits out its backoff before the next plan, except an
  ``Activated`` decision: a held request must not wait for a backoff that an
  unrelated failure started.
"""

from __future__ import annotations

from collections.abc import Callable

from scaler.actuator import Actuator, WritePlan, plan_writes
from scaler.kube.types import CompanionInfo, LeaderElector, TargetSnapshot
from scaler.metrics import Metrics
from scaler.placement.placer import Placer, pair_counts
from scaler.policy.api import Decision, Mode, Reason
from scaler.policy.protocol import Policy
from scaler.signals.hub import SignalHub, SignalView
from scaler.targets.book import TargetConfig
from scaler.targets.state import TargetLoop

__all__ = ["Decider"]


class Decider:
    """Decides for one target at a time and plans the writes (see the module docstring)."""

    def __init__(
        self,
        *,
        signals: SignalHub,
        policy: Policy,
        actuator: Actuator,
        leader: LeaderElector,
        metrics: Metrics,
        placer: Placer | None,
        wall_clock: Callable[[], float],
    ) -> None:
        self._signals = signals
        self._policy = policy
        self._actuator = actuator
        self._leader = leader
        self._metrics = metrics
        # The wall clock measures placement's pending-timeout against the pods'
        # creationTimestamp, which the API server writes in wall time.
        self._placer = placer
        self._wall_clock = wall_clock

    def decide(
        self,
        loop: TargetLoop,
        entry: TargetConfig,
        snap: TargetSnapshot,
        now: float,
        *,
        activation: bool = False,
    ) -> Decision | None:
        """Decide for ``loop``'s target at ``now``; None when its annotations are invalid.

        Raises ``ValueError`` when the policy refuses the inputs."""
        view = self._signals.observe(loop.key, entry.config, now=now)
        loop.view = view
        config = entry.config
        if config is None:
            # Nothing is decided while the annotations are invalid: an earlier
            # decision must not show as the current one (GET /v1/targets).
            loop.decision = None
            loop.placement = None
            loop.decided_at = now
            return None
        ready, current = self._pair_counts(loop, snap)
        observation = view.observation(ready=ready, spec=current, activation=activation)
        decision, loop.state = self._policy.decide(
            config=config, observation=observation, state=loop.state, now=now
        )
        if view.combined.demand.busy or activation:
            loop.last_busy_s = now
        if self._placer is not None:
            loop.placement = self._placer.plan(
                deployment=snap.deployment,
                pods=snap.pods,
                placement=config.placement,
                target=decision.desired,
                now_wall=self._wall_clock(),
            )
        loop.decision = decision
        loop.decided_at = now
        self._publish(loop, view, snap, decision, ready)
        return decision

    def plan(
        self,
        loop: TargetLoop,
        entry: TargetConfig,
        snap: TargetSnapshot,
        decision: Decision | None,
        now: float,
    ) -> WritePlan | None:
        """The writes ``decision`` needs, or None: not the leader, or backing off."""
        if not self._leader.is_leader:
            return None
        waking = decision is not None and decision.reason is Reason.ACTIVATED
        if self._actuator.backing_off(loop.key, now) and not waking:
            return None
        view = loop.view
        companion = self._companion(snap.deployment.key)
        placement = loop.placement if decision is not None else None
        return plan_writes(
            placement=placement,
            companion_replicas=companion.spec_replicas if companion is not None else None,
            total_before=self._pair_counts(loop, snap)[1] if placement is not None else None,
            deployment=snap.deployment,
            pods=snap.pods,
            decision=decision,
            problem=entry.problem,
            problem_reported=loop.problem_reported,
            status=loop.status,
            intended=loop.intended,
            last_change_wall=loop.last_change_wall,
            pod_load=view.combined.pod_load if view is not None else None,
            readings=view.readings if view is not None else None,
        )

    def _companion(self, key: str) -> CompanionInfo | None:
        return self._placer.companion(key) if self._placer is not None else None

    def _pair_counts(self, loop: TargetLoop, snap: TargetSnapshot) -> tuple[int, int]:
        # A pair's current scale is the last target decided: the one a failed status
        # write still intends, if any, else the one the annotation holds. With the
        # annotation's, a change whose status write failed would be announced again.
        last = (loop.intended or loop.status or {}).get("desired")
        return pair_counts(snap.deployment, self._companion(snap.deployment.key), last)

    def _publish(
        self,
        loop: TargetLoop,
        view: SignalView,
        snap: TargetSnapshot,
        decision: Decision,
        ready: int,
    ) -> None:
        """The decision's gauges: desired and ready replicas, by capacity type with a plan."""
        placement = loop.placement
        self._metrics.observe_decision(
            loop.key,
            desired=decision.desired,
            ready=ready,
            panic=decision.mode is Mode.PANIC,
            readings=view.readings,
            observed=view.combined.observed,
            spot_fallback=placement.split.covering if placement is not None else 0,
        )
        if placement is None:
            return
        companion = self._companion(snap.deployment.key)
        self._metrics.observe_split(
            loop.key,
            desired={"on-demand": placement.split.on_demand, "spot": placement.split.spot},
            ready={
                "on-demand": snap.deployment.ready_replicas,
                "spot": companion.ready_replicas if companion is not None else 0,
            },
        )
