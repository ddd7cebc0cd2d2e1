"""Carrying out a placement plan: the companion, the pin, the spot scale, the Events.

The actuator's placement half (DESIGN §1: only the actuator writes). For a
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

A failed write raises :class:`~scaler.kube.errors.KubeError`; the caller
logs and counts it, and the next decision plans again from what the
watches show (every step is idempotent: ensure, scale and patches check
first).
"""

from __future__ import annotations

import logging

from scaler.kube.errors import KubeError
from scaler.kube.types import CompanionInfo, CompanionWrites, DeploymentInfo, EventSink, ScaleTarget
from scaler.policy.companion import build_companion, companion_name, pin_patch, unpin_patch
from scaler.policy.placement_plan import SPOT_FALLBACK, PlacementPlan
from scaler.policy.providers import ProviderPreset

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

    async def carry_out(self, deployment: DeploymentInfo, plan: PlacementPlan) -> None:
        d = deployment
        name = companion_name(d.name)
        if plan.companion_replicas is not None:
            if plan.ensure_companion:
                body = build_companion(d.raw, preset=self.preset, replicas=plan.companion_replicas)
                done = await self._companions.ensure_companion(body)
                log.info("%s: spot companion %s %s", d.key, name, done)
            if plan.pin:
                patch = pin_patch(d.raw, self.preset)
                if patch is not None:
                    await self._companions.patch_deployment(d.namespace, d.name, patch)
            await self._scale.scale(d.namespace, name, plan.companion_replicas)
        else:
            if plan.delete_companion and await self._companions.delete_companion(d.namespace, name):
                log.info("%s: spot companion %s deleted (policy on-demand)", d.key, name)
            if plan.unpin:
                patch = unpin_patch(d.raw)
                if patch is not None:
                    await self._companions.patch_deployment(d.namespace, d.name, patch)
        for reason, message in plan.events:
            log.info("%s: %s: %s", d.key, reason, message)
            try:
                await self._events.emit(
                    d, reason=reason, message=message, warning=reason == SPOT_FALLBACK
                )
            except KubeError as exc:  # the writes happened; a lost Event must not undo them
                log.warning("%s: could not record event %s: %s", d.key, reason, exc)

    async def remove_orphan(self, companion: CompanionInfo) -> None:
        """Delete a companion whose Deployment is no longer opted in, and unpin that Deployment."""
        owner = await self._companions.read_deployment(companion.namespace, companion.companion_of)
        if owner is not None:
            patch = unpin_patch(owner)
            if patch is not None:
                await self._companions.patch_deployment(
                    companion.namespace, companion.companion_of, patch
                )
        await self._companions.delete_companion(companion.namespace, companion.name)
        log.info(
            "%s/%s: opted out: spot companion %s deleted",
            companion.namespace,
            companion.companion_of,
            companion.name,
        )
