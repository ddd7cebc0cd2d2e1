"""Carrying out a placement plan: the companion, the pin, the spot scale, the Events.

The actuator's placement half (only the actuator writes: docs/architecture.md). For a
spot policy, in this order, so that capacity is never taken away before its
replacement is asked for:

1. create the companion ``<name>-spot`` (or rebuild it when the user's
   template changed), at the plan's spot replicas;
2. pin the user's Deployment to on-demand capacity (once; Event
   ``OnDemandPinned`` says it rolls the user's pods);
3. scale the companion to the plan's spot replicas;
4. the Events of the plan (``SpotFallback`` as a Warning, ``SpotRecovered``).

The user's Deployment is scaled to the plan's on-demand replicas by the
actuator's usual path (with its deletion costs, Events and status).

For ``on-demand`` (the policy went back): delete the companion, then take
the pin off (another one-time rollout). An orphan companion (its
Deployment is no longer opted in) is deleted and its owner unpinned.

Every write is fenced: ``fence`` (the actuator's Lease check) is called
before each and raises when this replica no longer leads. A failed write
raises :class:`~groundwork.kube.errors.KubeError`; the caller logs and counts
it, and the next decision plans again from what the watches show (every
step is idempotent: ensure, scale and patches check first). The companion's
scale is read through ``/scale`` and written with that ``resourceVersion``,
as the actuator writes the user's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from groundwork.kube.errors import KubeError
from scaler.kube.types import CompanionInfo, CompanionWrites, DeploymentInfo, EventSink, ScaleTarget
from scaler.policy.placement.companion import (
    build_companion,
    companion_name,
    pin_patch,
    unpin_patch,
)
from scaler.policy.placement.plan import ON_DEMAND_PINNED, SPOT_FALLBACK, PlacementPlan
from scaler.policy.placement.providers import ProviderPreset

__all__ = ["PlacementActuation"]

log = logging.getLogger(__name__)


class PlacementActuation:
    def __init__(
        self,
        *,
        companions: CompanionWrites,
        scale_target: ScaleTarget,
        events: EventSink,
        preset: ProviderPreset,
    ) -> None:
        self._companions = companions
        self._scale = scale_target
        self._events = events
        self.preset = preset
        # key -> the resourceVersion of the Deployment object a pin was planned
        # from: a decision made again on that same (stale) object after a
        # conflict must not pin, nor announce the rollout, a second time.
        self._pinned_from: dict[str, str] = {}

    async def carry_out(
        self,
        deployment: DeploymentInfo,
        plan: PlacementPlan,
        *,
        fence: Callable[[], None] = lambda: None,
    ) -> str | None:
        """Carry out ``plan``; the user's Deployment's new ``resourceVersion`` when it
        was patched (pin or unpin), else ``None``."""
        d = deployment
        name = companion_name(d.name)
        version: str | None = None
        seen_version = str((d.raw.get("metadata") or {}).get("resourceVersion", ""))
        events = plan.events
        if plan.pin and seen_version and self._pinned_from.get(d.key) == seen_version:
            plan = replace(plan, pin=False)
            events = tuple(e for e in events if e[0] != ON_DEMAND_PINNED)
        if plan.companion_replicas is not None:
            if plan.ensure_companion:
                body = build_companion(d.raw, preset=self.preset, replicas=plan.companion_replicas)
                fence()
                done = await self._companions.ensure_companion(body)
                log.info("%s: spot companion %s %s", d.key, name, done)
            if plan.pin:
                patch = pin_patch(d.raw, self.preset)
                if patch is not None:
                    fence()
                    version = await self._companions.patch_deployment(d.namespace, d.name, patch)
                    self._pinned_from[d.key] = seen_version
            now = await self._scale.read_scale(d.namespace, name)
            if now.replicas != plan.companion_replicas:
                fence()
                await self._scale.scale(
                    d.namespace,
                    name,
                    plan.companion_replicas,
                    resource_version=now.resource_version,
                )
        else:
            if plan.delete_companion:
                fence()
                if await self._companions.delete_companion(d.namespace, name):
                    log.info("%s: spot companion %s deleted (policy on-demand)", d.key, name)
            if plan.unpin:
                patch = unpin_patch(d.raw)
                if patch is not None:
                    fence()
                    version = await self._companions.patch_deployment(d.namespace, d.name, patch)
            self._pinned_from.pop(d.key, None)
        for reason, message in events:
            log.info("%s: %s: %s", d.key, reason, message)
            try:
                fence()
                await self._events.emit(
                    d, reason=reason, message=message, warning=reason == SPOT_FALLBACK
                )
            except KubeError as exc:  # the writes happened; a lost Event must not undo them
                log.warning("%s: could not record event %s: %s", d.key, reason, exc)
        return version

    async def remove_orphan(
        self, companion: CompanionInfo, *, fence: Callable[[], None] = lambda: None
    ) -> None:
        """Delete a companion whose Deployment is no longer opted in, and unpin that Deployment."""
        owner = await self._companions.read_deployment(companion.namespace, companion.companion_of)
        if owner is not None:
            patch = unpin_patch(owner)
            if patch is not None:
                fence()
                await self._companions.patch_deployment(
                    companion.namespace, companion.companion_of, patch
                )
        fence()
        await self._companions.delete_companion(companion.namespace, companion.name)
        log.info(
            "%s/%s: opted out: spot companion %s deleted",
            companion.namespace,
            companion.companion_of,
            companion.name,
        )
