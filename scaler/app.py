"""The scaler's HTTP face (port 8090): reports in, activations in, state out.

====================  =====  =====================================================
endpoint              auth   does
====================  =====  =====================================================
POST /v1/stats        token  record an activator's report -> 200 {"activators": n}
POST /v1/activate     token  decide for the target now -> 202 (404: unknown target;
                             422 not_woken: its annotations are invalid)
GET  /v1/targets      none   live signals, stable/panic averages, mode, desired
GET  /healthz         none   the process is alive
GET  /readyz          none   the server is serving (503 once shutting down)
GET  /metrics         none   Prometheus text
====================  =====  =====================================================

Main decision, authentication: both write endpoints require
``Authorization: Bearer <token>`` (compared in constant time) and answer 401
without it, before reading the body, so an unauthenticated client can neither
feed demand in (and make the scaler grow a model) nor wake one. ``/readyz``
means "serving": it depends on neither the API server nor the Lease, so every
replica takes reports and keeps its windows warm.

The leader's answers to both write endpoints also carry its word on
routing (``"leader": true``): the warm tier's sleeping endpoints
(``"sleeping"``) and each GPU-shaped model's endpoints with their shape,
weight and reach (``"shapes"``, :mod:`scaler.policy.shapes.routes`).

Errors are JSON ``{"error": {"message", "type", "code"}}`` as the activator's.

An activation of a target whose annotations are invalid is answered at once
with 422 and type ``not_woken``, the message naming the Deployment and each
bad annotation (with ``target`` and ``problem`` beside ``error``): Tidal
leaves such a Deployment's scale alone, so the activator would otherwise
hold its requests until their cold-start timeout and answer a 504 that says
nothing of why. The activator answers the requests it holds for that
target with this message (``activator.scaler_link.wake_refusal``). Every replica
answers it (each keeps the configs), and every activation asks again, so
requests that arrive later, at any activator, get it too, and a fix takes
effect at the next request.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from groundwork.rules.stats_report import (
    ReportError,
    ScalerAnswer,
    answer_json,
    is_target_key,
    parse_report,
)
from scaler.controller import Controller
from scaler.metrics import Metrics
from scaler.policy.api import Demand
from scaler.policy.events import INVALID_ANNOTATION
from scaler.signals.activator_reports import ActivatorReports
from scaler.signals.hub import SignalHub
from scaler.targets.state import TargetState

__all__ = ["ServerState", "build_app", "target_view"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024  # a report for 100,000 targets fits


class ServerState:
    """Whether the server is serving (``/readyz``)."""

    def __init__(self) -> None:
        self.serving = True


STATE_KEY = web.AppKey("state", ServerState)


def _error(status: int, message: str, kind: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "code": status}}
    return web.json_response(body, status=status)


NOT_WOKEN = "not_woken"


def _not_woken(target: str, problem: str) -> web.Response:
    body = {
        "error": {"message": f"Deployment {target}: {problem}", "type": NOT_WOKEN, "code": 422},
        "target": target,
        "problem": problem,
    }
    return web.json_response(body, status=422)


def target_view(state: TargetState) -> dict[str, Any]:
    """One target in ``GET /v1/targets``: live signals and the last decision (none while
    its annotations are invalid: an earlier one would not be what the scaler does now)."""
    decision = state.decision if state.problem is None else None
    combined = state.combined
    demand = combined.demand if combined is not None else Demand(False, False)
    return {
        "target": state.key,
        "pool": state.pool,
        "valid": state.problem is None,
        "problem": state.problem,
        "spec_replicas": state.spec_replicas,
        "ready_replicas": state.ready_replicas,
        "desired": decision.desired if decision else None,
        "mode": decision.mode.value if decision else None,
        # An invalid config is decided on by nobody: say so rather than nothing.
        "reason": (
            INVALID_ANNOTATION
            if state.problem is not None
            else decision.reason.value
            if decision
            else None
        ),
        "message": state.problem or (decision.message if decision else ""),
        "per_signal_desired": (
            {k.value: v for k, v in decision.per_signal.items()} if decision else {}
        ),
        "signals": {
            kind.value: {"stable": r.stable, "panic": r.panic, "fresh": r.fresh}
            for kind, r in state.readings.items()
        },
        "observed": dict(combined.observed) if combined else {},
        "activators": combined.activators if combined else 0,
        "busy": demand.busy,
        "all_sources_fresh": demand.all_sources_fresh,
        "decided_at_s": state.decided_at,
        # SLO-first scaling: the learned capacity and what it sized.
        **({"slo": decision.slo.as_json()} if decision and decision.slo else {}),
        **_placement_view(state),
        **({"shapes": state.shapes} if state.shapes is not None else {}),
    }


def _placement_view(state: TargetState) -> dict[str, Any]:
    """Spot placement's part of a target: the split, why spot is not serving, the cost."""
    out: dict[str, Any] = {}
    if state.cost is not None:
        out["cost"] = state.cost.as_json()
    plan = state.placement
    if plan is not None:
        out["placement"] = {
            "on_demand": plan.split.on_demand,
            "spot": plan.split.spot,
            "covering": plan.split.covering,
            "spot_available": plan.counts.available,
            "spot_ready": plan.counts.ready,
            "spot_unavailable": {pod: str(why) for pod, why in plan.counts.unavailable.items()},
        }
    return out


async def _read_json(request: web.Request) -> Any:
    try:
        return await request.json(loads=json.loads)
    except ValueError as exc:
        raise ReportError(f"body is not JSON: {exc}") from exc


def _target_of(body: Any) -> str | None:
    """The ``namespace/name`` an activation names, or None when it names none."""
    target = body.get("target") if isinstance(body, dict) else None
    return target if is_target_key(target) else None


class _Handlers:
    """The endpoints of the table above, over the controller and the signal hub."""

    def __init__(
        self,
        *,
        controller: Controller,
        signals: SignalHub,
        reports: ActivatorReports,
        metrics: Metrics,
        token: str,
        clock: Callable[[], float],
        identity: str,
        leader: Callable[[], bool],
    ) -> None:
        self._controller = controller
        self._signals = signals
        self._reports = reports
        self._metrics = metrics
        self._expected = f"Bearer {token}".encode()
        self._clock = clock
        self._identity = identity
        self._leader = leader

    def _authorized(self, request: web.Request) -> bool:
        got = request.headers.get("Authorization", "").encode()
        return hmac.compare_digest(got, self._expected)

    def _answer(self, *, activators: int | None = None, target: str | None = None) -> ScalerAnswer:
        # The warm tier: endpoints activators must not route to (asleep, being put to
        # sleep or woken); GPU shapes: each endpoint's shape, weight and reach. Only
        # the leader's counts; activators take the leader's word.
        leading = self._leader()
        if not leading:
            return ScalerAnswer(leader=False, activators=activators, target=target)
        warm = self._controller.warm
        sleeping = None
        if warm is not None:
            sleeping = {key: tuple(ends) for key, ends in warm.pool.not_routable().items()}
        return ScalerAnswer(
            leader=True,
            activators=activators,
            target=target,
            sleeping=sleeping,
            shapes=self._controller.shape_routes(),
        )

    def _warm_view(self, key: str) -> dict[str, Any]:
        warm = self._controller.warm
        if warm is None or not self._leader():
            return {}
        return {"warm": warm.pool.describe(key)}

    async def stats(self, request: web.Request) -> web.Response:
        metrics = self._metrics
        if not self._authorized(request):
            metrics.report("unauthorized")
            return _error(401, "missing or wrong bearer token", "unauthorized")
        try:
            report = parse_report(await _read_json(request))
            now = self._clock()
            count = self._reports.record(report, now=now)
            # Into the hub now, at its arrival time: samples are taken when they arrive.
            self._signals.arrived(self._reports.name, now=now)
        except ReportError as exc:
            metrics.report("rejected")
            return _error(400, str(exc), "invalid_request")
        metrics.report("accepted")
        metrics.activators.set(count)
        return web.json_response(answer_json(self._answer(activators=count)))

    async def activate(self, request: web.Request) -> web.Response:
        metrics, controller = self._metrics, self._controller
        if not self._authorized(request):
            metrics.activation("unauthorized")
            return _error(401, "missing or wrong bearer token", "unauthorized")
        try:
            body = await _read_json(request)
        except ReportError as exc:
            metrics.activation("rejected")
            return _error(400, str(exc), "invalid_request")
        target = _target_of(body)
        if target is None:
            metrics.activation("rejected")
            named = body.get("target") if isinstance(body, dict) else None
            return _error(
                400, f"target: expected 'namespace/name', got {named!r}", "invalid_request"
            )
        problem = controller.not_woken(target)
        if problem is not None:
            metrics.activation("not_woken")
            return _not_woken(target, problem)
        if not await controller.activate(target, now=self._clock()):
            metrics.activation("unknown_target")
            return _error(404, f"no opted-in Deployment {target}", "not_found")
        metrics.activation("accepted")
        return web.json_response(answer_json(self._answer(target=target)), status=202)

    async def targets(self, request: web.Request) -> web.Response:
        states = self._controller.target_states()
        body = {
            "identity": self._identity,
            "leader": self._leader(),
            "activators": self._reports.reporting(now=self._clock()),
            "targets": [{**target_view(t), **self._warm_view(t.key)} for t in states],
            # Every GPU or MIG instance any pod holds, whole, and what it does.
            "devices": self._controller.devices(),
        }
        return web.json_response(body)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        if not request.app[STATE_KEY].serving:
            return _error(503, "shutting down", "unavailable")
        return web.json_response({"status": "serving"})

    async def metrics_text(self, request: web.Request) -> web.Response:
        # Set when read: /metrics is the gauge's only reader, and a follower that
        # never writes still says it follows.
        self._metrics.set_leader(self._leader())
        self._metrics.activators.set(self._reports.reporting(now=self._clock()))
        resp = web.Response(body=generate_latest(self._metrics.registry))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp


def build_app(
    *,
    controller: Controller,
    signals: SignalHub,
    reports: ActivatorReports,
    metrics: Metrics,
    token: str,
    clock: Callable[[], float],
    identity: str = "",
    leader: Callable[[], bool] = lambda: False,
    state: ServerState | None = None,
) -> web.Application:
    if not token:
        raise ValueError("the scaler needs a bearer token for /v1/stats and /v1/activate")
    handlers = _Handlers(
        controller=controller,
        signals=signals,
        reports=reports,
        metrics=metrics,
        token=token,
        clock=clock,
        identity=identity,
        leader=leader,
    )
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[STATE_KEY] = state or ServerState()
    app.router.add_post("/v1/stats", handlers.stats)
    app.router.add_post("/v1/activate", handlers.activate)
    app.router.add_get("/v1/targets", handlers.targets)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    app.router.add_get("/metrics", handlers.metrics_text)
    return app
