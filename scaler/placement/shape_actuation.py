"""Carrying out a shape step: the shapes' companions, their scale, the Events.

The actuator's shape half (only the actuator writes: docs/architecture.md),
called after the user's Deployment was scaled to its shape's part. In this
order, so that a shape is asked for before another one lets go:

1. create each companion ``<name>-<shape>`` the plan needs, or rebuild it
   (its template hash differs: the user's template or the shape's
   declaration changed), at the plan's replicas;
2. scale each companion to the plan's replicas, through ``/scale`` with the
   ``resourceVersion`` just read, as the actuator writes the user's;
3. delete the companions of shapes no longer listed (the plan says so only
   once the others are Ready);
4. the plan's Events (``ShapeUnavailable`` as a Warning, ``ShapeRecovered``,
   ``ShapesChanged``).

Every write is fenced (``fence`` raises when this replica no longer leads).
A failed write raises :class:`~groundwork.kube.errors.KubeError`; the
actuator counts it and the next decision plans again from what the watches
show (each step checks first, so carrying a plan out twice is harmless).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from groundwork.kube.errors import KubeError
from scaler.kube.types import (
    CompanionInfo,
    CompanionWrites,
    DeploymentInfo,
    EventSink,
    ScaleTarget,
)
from scaler.placement.shaper import ShapesMade
from scaler.policy.shapes.companion import build_shape_companion, shape_companion_name

__all__ = ["ShapeActuation"]

log = logging.getLogger(__name__)


class ShapeActuation:
    def __init__(
        self, *, companions: CompanionWrites, scale_target: ScaleTarget, events: EventSink
    ) -> None:
        self._companions = companions
        self._scale = scale_target
        self._events = events

    async def carry_out(
        self, deployment: DeploymentInfo, made: ShapesMade, *, fence: Callable[[], None]
    ) -> None:
        """Carry out ``made``'s plan (module docstring)."""
        d, plan = deployment, made.plan
        chosen = {c.shape.name: c for c in made.shapes}
        fresh: set[str] = set()
        for shape in plan.ensure:
            body = build_shape_companion(d.raw, chosen[shape], replicas=plan.companions[shape])
            fence()
            done = await self._companions.ensure_companion(body)
            log.info("%s: shape companion %s %s", d.key, body["metadata"]["name"], done)
            if done == "created":
                fresh.add(shape)
        for shape, replicas in plan.companions.items():
            seen = made.companions.get(shape)
            if shape in fresh or (seen is not None and seen.spec_replicas == replicas):
                continue
            name = shape_companion_name(d.name, shape)
            now = await self._scale.read_scale(d.namespace, name)
            if now.replicas != replicas:
                fence()
                await self._scale.scale(
                    d.namespace, name, replicas, resource_version=now.resource_version
                )
        for shape in plan.delete:
            fence()
            if await self._companions.delete_companion(d.namespace, made.companions[shape].name):
                log.info("%s: shape companion of %s deleted (not listed)", d.key, shape)
        for reason, message, warning in plan.events:
            log.info("%s: %s: %s", d.key, reason, message)
            try:
                fence()
                await self._events.emit(d, reason=reason, message=message, warning=warning)
            except KubeError as exc:  # the writes happened; a lost Event must not undo them
                log.warning("%s: could not record event %s: %s", d.key, reason, exc)

    async def remove_orphan(
        self, companion: CompanionInfo, *, fence: Callable[[], None] = lambda: None
    ) -> None:
        """Delete a shape companion whose Deployment is no longer opted in."""
        fence()
        if await self._companions.delete_companion(companion.namespace, companion.name):
            log.info(
                "%s/%s: opted out: shape companion %s deleted",
                companion.namespace,
                companion.companion_of,
                companion.name,
            )
