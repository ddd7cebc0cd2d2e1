"""GPU shapes beside the control loop: what the watches know, turned into a shape step.

The service owns one :class:`Shaper`, stateless across targets (a model's
:class:`~scaler.policy.shapes.decide.ShapesState` lives in its reconciler).
For a model that lists shapes (docs/shapes.md), :meth:`Shaper.decide`
gathers what the pure step needs and calls it:

- which listed shape the user's template already is (the **template
  shape**, :func:`~scaler.policy.shapes.template.template_shape`; its pods
  carry no shape label), and the **base** the priors describe (the template
  shape, else the first listed);
- each shape's pods (by the pod label ``placement.tidal.dev/shape``, the
  template shape's by its absence) as :class:`PodFacts`, its Ready count,
  and its servers' counters from the signal hub's groups;
- what each shape's Deployment asks for now: the user's Deployment (with
  its spot companion) for the template shape, the companion of each other;

then :func:`~scaler.policy.shapes.decide.decide_shapes` and
:func:`~scaler.policy.shapes.plan.plan_shapes`, and returns both for the
actuator, with each pod's server address and shape for the activators'
word (:mod:`scaler.policy.shapes.routes`). :meth:`Shaper.leftover` plans
the deletion of shape companions of a model that no longer lists shapes.

Main decision: every scaler replica decides shapes, leader or not, as it
decides placement, so a follower that takes over knows each shape's
capacity and which shapes are capped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from groundwork.rules.stats_report import ShapeRoute
from scaler.kube.types import CompanionInfo, PodInfo, TargetSnapshot
from scaler.policy.api import ScalingConfig
from scaler.policy.placement.availability import PodFacts
from scaler.policy.placement.companion import user_template
from scaler.policy.protocol import Policy
from scaler.policy.shapes.companion import shape_template_hash
from scaler.policy.shapes.decide import ShapeSeen, ShapesOutcome, ShapesState, decide_shapes
from scaler.policy.shapes.declarations import ChosenShape
from scaler.policy.shapes.plan import (
    CompanionSeen,
    ShapePlan,
    plan_shapes,
    plan_without_shapes,
)
from scaler.policy.shapes.routes import shape_routes
from scaler.policy.shapes.template import SHAPE_LABEL, template_shape
from scaler.signals.hub import SignalView
from scaler.warm.pool import address_of

__all__ = ["ShapeView", "Shaper", "ShapesMade"]


class ShapeView(Protocol):
    """What the shape watch knows (:class:`~scaler.kube.shape_watch.ShapeWatch`)."""

    def companions(self, key: str) -> Mapping[str, CompanionInfo]: ...

    def owners(self) -> list[str]:
        """The Deployments (``namespace/name``) that have shape companions."""
        ...


@dataclass(frozen=True, slots=True)
class ShapesMade:
    """One shape step: the decision (``None``: the model lists no shapes, and only
    leftover companions are planned), its plan, and the companions it saw."""

    outcome: ShapesOutcome | None
    plan: ShapePlan
    companions: Mapping[str, CompanionInfo]
    template_shape: str | None
    total_before: int  # the replicas of the last mix (the model's scale before)
    shapes: tuple[ChosenShape, ...] = ()  # the shapes listed (their companions are built from)
    # Each pod's server (``ip:port``) and its shape, what the activators are told
    # (:mod:`scaler.policy.shapes.routes`).
    endpoints: Mapping[str, str] = field(default_factory=dict)

    def routes(self) -> dict[str, ShapeRoute]:
        """The activators' word on this model's endpoints (empty without a decision)."""
        return shape_routes(self.outcome, self.endpoints) if self.outcome is not None else {}


def _group(pod: PodInfo, template: str | None) -> str | None:
    return pod.labels.get(SHAPE_LABEL, template)


class Shaper:
    def __init__(
        self,
        *,
        view: ShapeView,
        facts: Callable[[Iterable[PodInfo]], list[PodFacts]],
        policy: Policy,
        wall_clock: Callable[[], float],
    ) -> None:
        self.view = view
        self._facts = facts
        self._policy = policy
        # pending-timeout runs from the pods' creationTimestamp, in wall time.
        self._wall_clock = wall_clock

    def companions(self, key: str) -> Mapping[str, CompanionInfo]:
        return self.view.companions(key)

    def decide(
        self,
        snap: TargetSnapshot,
        config: ScalingConfig,
        shapes: tuple[ChosenShape, ...],
        view: SignalView,
        *,
        state: ShapesState | None,
        spot_replicas: int = 0,
        activation: bool,
        now: float,
    ) -> ShapesMade:
        """One shape step for ``snap``'s model (module docstring). ``spot_replicas``:
        what the user's spot companion asks for (part of the template shape)."""
        d = snap.deployment
        companions = self.companions(d.key)
        template = template_shape(user_template(d.raw), shapes)
        base = template if template is not None else shapes[0].shape.name
        groups: dict[str, list[PodFacts]] = {c.shape.name: [] for c in shapes}
        endpoints: dict[str, str] = {}
        for pod, facts in zip(snap.pods, self._facts(snap.pods), strict=True):
            group = _group(pod, template)
            if group in groups:
                groups[group].append(facts)
                address = address_of(pod, config)
                if address is not None and not pod.terminating:
                    endpoints[address[1]] = group
        seen = {
            name: ShapeSeen(
                ready=sum(1 for p in pods if p.ready and not p.terminating),
                pods=tuple(pods),
                load=view.groups.get("" if name == template else name),
            )
            for name, pods in groups.items()
        }
        current = {name: c.spec_replicas for name, c in companions.items() if name != template}
        if template is not None:
            current[template] = d.spec_replicas + spot_replicas
        if state is None:
            state = ShapesState.running({n: r for n, r in current.items() if r > 0}, shapes)
        total_ready = sum(s.ready for s in seen.values())
        observation = view.observation(
            ready=total_ready, spec=sum(state.targets.values()), activation=activation
        )
        outcome = decide_shapes(
            policy=self._policy,
            config=config,
            shapes=shapes,
            base=base,
            observation=observation,
            seen=seen,
            current=current,
            state=state,
            now=now,
            now_wall=self._wall_clock(),
        )
        by_name = {c.shape.name: c for c in shapes}
        companions_seen = {
            name: CompanionSeen(
                spec_replicas=c.spec_replicas,
                ready_replicas=c.ready_replicas,
                current=name in by_name
                and c.template_hash == shape_template_hash(d.raw, by_name[name]),
            )
            for name, c in companions.items()
        }
        asks = outcome.asks
        plan = plan_shapes(
            asks=asks,
            listed=tuple(by_name),
            template_shape=template,
            seen=companions_seen,
            mix=outcome.mix,
            before=state.mix,
            turns=outcome.turns,
            all_ready=all(seen[name].ready >= n for name, n in asks.items() if name in seen),
        )
        return ShapesMade(
            outcome,
            plan,
            companions,
            template,
            sum(state.targets.values()),
            shapes,
            endpoints,
        )

    def orphans(self, targets: Iterable[str]) -> list[CompanionInfo]:
        """Shape companions whose Deployment is not opted in any more (``targets``: the
        opted-in keys); a deleted Deployment's go with it (owner references)."""
        wanted = set(targets)
        return [
            c
            for key in self.view.owners()
            if key not in wanted
            for c in self.view.companions(key).values()
        ]

    def leftover(self, snap: TargetSnapshot, desired: int) -> ShapesMade | None:
        """For a model that lists no shapes: ``None``, or the deletion of the shape
        companions it kept, once its own Deployment serves ``desired``."""
        d = snap.deployment
        companions = self.companions(d.key)
        if not companions:
            return None
        seen = {
            name: CompanionSeen(c.spec_replicas, c.ready_replicas, current=True)
            for name, c in companions.items()
        }
        plan = plan_without_shapes(desired=desired, user_ready=d.ready_replicas, seen=seen)
        if plan is None:
            return None
        return ShapesMade(None, plan, companions, None, d.spec_replicas)
