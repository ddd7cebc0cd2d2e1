"""Placement beside the control loop: the plan from what the watches know, orphan companions.

The service owns one :class:`Placer`, stateless across targets. After each
decision a target's reconciler calls :meth:`Placer.plan` with the target's
Deployment and pods, its companion, its placement config, the decided
replicas and the :class:`~scaler.policy.placement.fallback.FallbackState` its last
plan left; the placer turns what the watches know (:class:`PlacementView`:
nodes and spot companions) into the policy's values, calls
:func:`~scaler.policy.placement.plan.plan_placement` and returns the
:class:`~scaler.policy.placement.plan.PlacementPlan` for the actuator, whose
``state`` the reconciler keeps for the next decision (a model's state lives
in its reconciler alone, so forgetting a target forgets its cover). Every
scaler replica plans (a follower that takes over knows what is covered);
only the leader acts on the plan.

:meth:`Placer.facts` tells each pod's capacity type and GPU model from its
node, for the plan and for the GPU ledger (:mod:`scaler.gpu_ledger`, which
counts cost). :meth:`Placer.orphans` lists spot
companions whose Deployment is no longer opted in (label removed): the
actuator deletes them and takes the pin off. (A target whose policy went
back to ``on-demand`` is still opted in: its plan says to delete.)

Main decision: the clock here is the wall clock (epoch seconds), passed in
by the caller, because ``pending-timeout`` is measured from the pods'
``creationTimestamp``, which the API server writes in wall time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from scaler.kube.placement_watch import pod_facts
from scaler.kube.types import CompanionInfo, DeploymentInfo, NodeInfo, PodInfo, TargetSnapshot
from scaler.policy.api import PlacementConfig
from scaler.policy.placement.availability import CapacityType, PodFacts
from scaler.policy.placement.companion import companion_name, is_pinned, template_hash
from scaler.policy.placement.fallback import DEFAULT_RELEASE_HOLD_S, FallbackState
from scaler.policy.placement.plan import PlacementPlan, plan_placement
from scaler.policy.placement.providers import NodeRequirement, ProviderPreset
from scaler.policy.placement.split import split

__all__ = ["PlacementView", "Placer", "initial_state", "pair_counts"]


class PlacementView(Protocol):
    """What the placement watches know (:class:`~scaler.kube.placement_watch.PlacementWatch`)."""

    def nodes(self) -> Mapping[str, NodeInfo]: ...

    def companions(self) -> Mapping[str, CompanionInfo]: ...


def initial_state(
    *, placement: PlacementConfig, target: int, pods: Sequence[PodFacts]
) -> FallbackState:
    """The cover a target starts with: its Ready on-demand replicas above the baseline.

    When a model switches from on-demand to a spot policy (or the scaler
    restarts), those replicas serve now; counting them as cover keeps them
    until spot replicas are Ready to replace them, instead of dropping to the
    baseline while spot loads.
    """
    if placement.policy == "on-demand" or placement.fallback == "none" or target == 0:
        return FallbackState()
    asked = split(target=target, placement=placement, ready_spot=0).spot
    baseline = 0 if placement.policy == "spot" else placement.on_demand_baseline
    on_demand_ready = sum(
        1
        for p in pods
        if p.capacity_type is CapacityType.ON_DEMAND and p.ready and not p.terminating
    )
    return FallbackState(covered=min(asked, max(0, on_demand_ready - min(baseline, target))))


def pair_counts(
    deployment: DeploymentInfo, companion: CompanionInfo | None, last_desired: object
) -> tuple[int, int]:
    """Ready and current replicas of the whole model: with a spot companion, both halves.

    The current scale of a pair is the last target decided (``last_desired``,
    the status annotation's ``desired``), not the sum of the two Deployments,
    which includes on-demand cover and spot over-provisioning.
    """
    if companion is None:
        return deployment.ready_replicas, deployment.spec_replicas
    ready = deployment.ready_replicas + companion.ready_replicas
    if isinstance(last_desired, int) and last_desired >= 0:
        return ready, last_desired
    return ready, deployment.spec_replicas + companion.spec_replicas


def _describe(requirement: NodeRequirement) -> str:
    """As kubectl's label selectors say it: ``key=value`` or ``key notin (a,b)``."""
    if requirement.as_selector is not None:
        return ",".join(f"{k}={v}" for k, v in requirement.as_selector.items())
    return f"{requirement.key} {requirement.operator.lower()} ({','.join(requirement.values)})"


class Placer:
    def __init__(
        self,
        *,
        view: PlacementView,
        preset: ProviderPreset,
        hold_s: float = DEFAULT_RELEASE_HOLD_S,
    ) -> None:
        self.view = view
        self.preset = preset
        self.hold_s = hold_s

    def companion(self, key: str) -> CompanionInfo | None:
        """The spot companion of the Deployment ``key``, if the watch has one."""
        return self.view.companions().get(key)

    def facts(self, pods: Iterable[PodInfo]) -> list[PodFacts]:
        nodes = self.view.nodes()
        return [pod_facts(p, nodes, self.preset) for p in pods]

    def plan(
        self,
        snap: TargetSnapshot,
        *,
        companion: CompanionInfo | None,
        placement: PlacementConfig,
        target: int,
        state: FallbackState | None,
        now_wall: float,
    ) -> PlacementPlan:
        """This decision's placement for ``snap``'s Deployment, whose spot companion the
        caller looked up (:meth:`companion`) for its pair counts. ``state`` is the
        last plan's (``None`` for a target's first decision: the cover starts from its
        Ready on-demand replicas, :func:`initial_state`)."""
        deployment, pods = snap.deployment, snap.pods
        current = companion is not None and companion.template_hash == template_hash(
            deployment.raw, self.preset
        )
        facts = self.facts(pods)
        if state is None:
            state = initial_state(placement=placement, target=target, pods=facts)
        return plan_placement(
            placement=placement,
            target=target,
            pods=facts,
            companion_name=companion_name(deployment.name),
            companion_exists=companion is not None,
            companion_current=current,
            pinned=is_pinned(deployment.raw, self.preset),
            user_ready=deployment.ready_replicas,
            pin_description=_describe(self.preset.on_demand),
            state=state,
            now_wall=now_wall,
            hold_s=self.hold_s,
        )

    def orphans(self, targets: Iterable[str]) -> list[CompanionInfo]:
        """Companions whose Deployment is not opted in any more (``targets``: the opted-in keys)."""
        wanted = set(targets)
        return [c for key, c in self.view.companions().items() if key not in wanted]
