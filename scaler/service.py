"""``tidal scaler``: run the controller, its HTTP server and its watches.

Composition: Kubernetes access (``KUBECONFIG`` or in-cluster), the opted-in
Deployments' watches and the target book over them, the demand sources in
the signal hub (the activators' reports, which the HTTP API takes, and every
polled source the settings register and turn on,
:func:`scaler.signals.registry.polled_sources`, each polled on its own
schedule), the
Lease election, the actuator, the controller ticking every
``tick_interval_s``, and the aiohttp server on ``port`` (default 8090).
uvloop runs the loop (entry point only).

Shutdown on SIGTERM/SIGINT: ``/readyz`` fails first, then the background tasks
stop (the leader releases its Lease so a successor need not wait it out),
then the server and the connections close.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import prometheus_client
import uvloop
from aiohttp import web
from prometheus_client import CollectorRegistry

from groundwork.kube.connection import KubeAccess, KubeConfigError, connect
from groundwork.settings_loading import add_setting_flags, flags_from_args
from scaler.actuator import ActuatorSettings, kube_actuator
from scaler.app import ServerState, build_app
from scaler.controller import Controller, ControllerSettings
from scaler.gpu_ledger import GpuLedger
from scaler.kube.cluster import KubeCluster
from scaler.kube.leader import LeaseElector
from scaler.kube.placement_watch import PlacementWatch
from scaler.kube.shape_watch import ShapeWatch
from scaler.metrics import Metrics
from scaler.placement.placer import Placer
from scaler.placement.shaper import Shaper
from scaler.policy.placement.providers import ProviderPreset
from scaler.policy.protocol import PurePolicy
from scaler.settings import (
    FLAGS,
    ScalerSettings,
    SettingsError,
    describe_settings,
    load_settings,
    visible_secret_warnings,
)
from scaler.signals.activator_reports import ActivatorReports
from scaler.signals.base import TargetPods
from scaler.signals.hub import HubSettings, SignalHub
from scaler.signals.registry import Polled, SourceContext, polled_sources
from scaler.targets.book import TargetBook
from scaler.ticking import IntervalTicker
from scaler.warm.bill import PoolBill
from scaler.warm.gpu_memory import PrometheusGpuMemory
from scaler.warm.moves import MoveSettings
from scaler.warm.tier import HttpReplicaCalls, WarmSettings, WarmTier
from scaler.warm.views import ActuatorEvents, ModelBoard

__all__ = ["configure", "run", "serve"]

log = logging.getLogger("tidal.scaler")

#: Seconds between two wakes of one target asked for by a polled source's held requests.
WAKE_REPEAT_S = 2.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = describe_settings()
    add_setting_flags(parser, ScalerSettings, flag_names=FLAGS)


def _identity(settings: ScalerSettings) -> str:
    return (
        settings.identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}:{os.getpid()}"
    )


async def _poll(
    polled: Polled,
    listing: Callable[[], list[TargetPods]],
    signals: SignalHub,
    wake: Callable[[str], Awaitable[object]],
) -> None:
    """Refresh a polled source on its schedule for the pods ``listing`` names, tell
    the hub when each refresh completes, and ``wake`` the targets for which the source
    holds requests with no ready replica (an endpoint picker's waiting room) at once."""
    source, interval_s = polled.source, polled.every_s
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        try:
            listed = listing()
            await source.refresh(listed, now=started)
            # The samples arrive now, as the scrape or query completes.
            now = loop.time()
            keys = [t.key for t in listed]
            signals.arrived(source.name, now=now, keys=keys)
            waiting = signals.held_for_wake(source.name, now=now, keys=keys)
            await asyncio.gather(*(wake(key) for key in waiting))
        except Exception:  # a bug in one refresh must not stop the loop
            log.exception("refresh of %s failed", source.name)
        await asyncio.sleep(max(0.0, interval_s - (loop.time() - started)))


async def _account(
    ledger: GpuLedger,
    book: TargetBook,
    warm: WarmTier | None,
    every_s: float,
    clock: Callable[[], float],
) -> None:
    """Charge GPU-seconds and cost every ``every_s``, beside the decisions (none waits
    for it); nothing is charged until the Deployment list has synced."""
    while True:
        try:
            if book.synced:
                now = clock()
                bill = PoolBill(warm.pool) if warm else None
                ledger.account(
                    now,
                    book.snapshots(),
                    bill.pod_use if bill else None,
                    wanted=book.wanted,
                    placements=bill.placements(now) if bill else None,
                )
        except Exception:  # a bug in accounting must not stop it for good
            log.exception("GPU accounting failed")
        await asyncio.sleep(every_s)


async def _refresh_memory(
    memory: PrometheusGpuMemory, every_s: float, clock: Callable[[], float]
) -> None:
    """Refresh the warm tier's GPU memory view every ``every_s``, until cancelled."""
    while True:
        await memory.refresh(now=clock())
        await asyncio.sleep(every_s)


@dataclass(frozen=True, slots=True)
class _Sources:
    """The demand sources: the activators' reports (the HTTP API records them) and the
    polled ones the settings turn on; and, with a Prometheus URL, the warm tier's view
    of GPU memory."""

    reports: ActivatorReports
    polled: list[Polled]
    memory: PrometheusGpuMemory | None

    def hub(self, settings: ScalerSettings, catalog: TargetBook) -> SignalHub:
        return SignalHub(
            sources=[self.reports, *(p.source for p in self.polled)],
            catalog=catalog,
            settings=HubSettings(
                fresh_within_s=settings.fresh_within_s,
                source_fresh_within_s={p.source.name: p.fresh_within_s for p in self.polled},
            ),
        )


def _sources(settings: ScalerSettings, session: aiohttp.ClientSession) -> _Sources:
    prom = settings.prometheus
    client = prom.client(session)
    memory = None
    if client is not None:
        memory = PrometheusGpuMemory(
            client,
            pod_label=prom.pod_label,
            namespace_label=prom.namespace_label,
            stale_after_s=prom.stale_after_s,
        )
    polled = polled_sources(settings, SourceContext(session=session))
    return _Sources(settings.reports.build(), polled, memory)


def _placement(
    settings: ScalerSettings, access: KubeAccess, ticker: IntervalTicker, preset: ProviderPreset
) -> tuple[PlacementWatch, Placer]:
    """Nodes and spot companions watched, and the placer over them."""

    def noticed(node: str) -> None:
        # An interruption notice is an event, not a tick: cover it in a decision now.
        log.info("node %s has an interruption notice: deciding now", node)
        ticker.poke()

    watch = PlacementWatch(
        access.api,
        preset=preset,
        on_notice=noticed,
        watch_timeout_s=settings.kube.watch_timeout_s,
        request_timeout_s=settings.kube.request_timeout_s,
    )
    return watch, Placer(view=watch, preset=preset, hold_s=settings.placement.release_hold_s)


def _elector(
    settings: ScalerSettings, access: KubeAccess, identity: str, ticker: IntervalTicker
) -> LeaseElector:
    """The Lease election. On winning the Lease the controller decides for every
    target at once, on its warm windows: the elector pokes the ticker."""

    def elected() -> None:
        log.info("%s is now the leader", identity)
        ticker.poke()

    return LeaseElector(
        access.api,
        on_elected=elected,
        namespace=settings.leader.namespace or access.namespace,
        identity=identity,
        name=settings.leader.lease_name,
        lease_duration_s=settings.leader.lease_duration_s,
        renew_deadline_s=settings.leader.renew_deadline_s,
        retry_period_s=settings.leader.retry_period_s,
    )


@dataclass(slots=True)
class _Scaler:
    """The named parts of a running scaler, built by :func:`_compose`."""

    identity: str
    cluster: KubeCluster
    placement_watch: PlacementWatch
    shape_watch: ShapeWatch
    leader: LeaseElector
    book: TargetBook
    signals: SignalHub
    sources: _Sources
    ledger: GpuLedger
    controller: Controller
    warm: WarmTier
    warm_events: ActuatorEvents
    ticker: IntervalTicker


def _compose(
    settings: ScalerSettings,
    access: KubeAccess,
    session: aiohttp.ClientSession,
    metrics: Metrics,
    clock: Callable[[], float],
) -> _Scaler:
    """The composition root: every part, wired to the others."""
    identity = _identity(settings)
    sources = _sources(settings, session)
    cluster = KubeCluster(
        access.api,
        watch_timeout_s=settings.kube.watch_timeout_s,
        request_timeout_s=settings.kube.request_timeout_s,
        pools=settings.kube.inference_pools,
    )
    ticker = IntervalTicker(settings.tick_interval_s)
    preset = settings.placement.preset()
    placement_watch, placer = _placement(settings, access, ticker, preset)
    ledger = GpuLedger(
        prices=settings.placement.price_table(
            flat={
                "on-demand": settings.prices.on_demand_per_gpu_hour,
                "spot": settings.prices.spot_per_gpu_hour,
            }
        ),
        metrics=metrics,
        facts=placer.facts,
        nodes=placer.view.nodes,
    )
    leader = _elector(settings, access, identity, ticker)
    policy = PurePolicy()
    shape_watch = ShapeWatch(
        access.api,
        namespace=settings.leader.namespace or access.namespace,
        watch_timeout_s=settings.kube.watch_timeout_s,
        request_timeout_s=settings.kube.request_timeout_s,
    )
    book = TargetBook(
        cluster, policy, gpu_metrics=bool(settings.prometheus.url), shapes=shape_watch
    )
    signals = sources.hub(settings, book)
    actuator = kube_actuator(
        access,
        identity=identity,
        leader=leader,
        metrics=metrics,
        request_timeout_s=settings.kube.request_timeout_s,
        settings=ActuatorSettings(max_concurrent_writes=settings.max_concurrent_writes),
        preset=preset,
    )
    # The warm tier reads the models' views off the board the reconcilers
    # publish on; its Events go through the actuator, fenced like every write.
    board = ModelBoard()
    warm_events = ActuatorEvents(actuator, book, metrics)
    warm = WarmTier(
        HttpReplicaCalls(session),
        clock=clock,
        views=board,
        events=warm_events,
        observe_wake=metrics.woke,
        memory=sources.memory,
        leading=lambda: leader.is_leader,
        settings=WarmSettings(handoff_s=settings.sleep_handoff_s),
        move_settings=MoveSettings(settle_s=settings.warm_move_settle_s)
        if settings.warm_moves
        else None,
    )
    controller = Controller(
        targets=book,
        signals=signals,
        actuator=actuator,
        placer=placer,
        ledger=ledger,
        policy=policy,
        metrics=metrics,
        clock=clock,
        settings=ControllerSettings(tick_interval_s=settings.tick_interval_s),
        warm=warm,
        board=board,
        shaper=Shaper(view=shape_watch, facts=placer.facts, policy=policy, wall_clock=time.time),
    )
    return _Scaler(
        identity, cluster, placement_watch, shape_watch, leader, book, signals, sources, ledger,
        controller, warm, warm_events, ticker,
    )  # fmt: skip


def _jobs(
    parts: _Scaler, settings: ScalerSettings, clock: Callable[[], float]
) -> list[tuple[str, Awaitable[None]]]:
    """The background tasks: watches, the election, the loop, accounting, the polls."""
    book = parts.book
    controller = parts.controller
    woken_at: dict[str, float] = {}

    async def wake(key: str) -> None:
        # Requests wait in a picker with no ready replica: an activation, as an
        # activator's /v1/activate is (it decides at once; from zero, it wakes), and
        # repeated while they wait, as an activator repeats its own, but no more
        # often than every WAKE_REPEAT_S, so a wake from sleep (about a second) is
        # not asked for twice and wakes no second replica.
        now = clock()
        if now - woken_at.get(key, -WAKE_REPEAT_S) < WAKE_REPEAT_S:
            return
        woken_at[key] = now
        if await controller.activate(key):
            log.debug("%s: requests wait for a replica in its endpoint picker: woken", key)

    jobs: list[tuple[str, Awaitable[None]]] = [
        ("watch", parts.cluster.run()),
        ("placement-watch", parts.placement_watch.run()),
        ("shape-watch", parts.shape_watch.run()),
        ("leader", parts.leader.run()),
        ("controller", parts.controller.run(parts.ticker)),
        ("gpu-ledger", _account(parts.ledger, book, parts.warm, settings.tick_interval_s, clock)),
    ]
    jobs += [
        (f"poll-{p.source.name}", _poll(p, book.poll_targets, parts.signals, wake))
        for p in parts.sources.polled
    ]
    memory = parts.sources.memory
    if memory is not None:
        jobs.append(("gpu-memory", _refresh_memory(memory, settings.prometheus.interval_s, clock)))
    return jobs


async def _listen(
    parts: _Scaler, settings: ScalerSettings, metrics: Metrics, state: ServerState
) -> web.AppRunner:
    """The HTTP API on ``settings.host:port``."""
    assert settings.token is not None
    leader = parts.leader
    app = build_app(
        controller=parts.controller,
        signals=parts.signals,
        reports=parts.sources.reports,
        metrics=metrics,
        token=settings.token.get_secret_value(),
        clock=asyncio.get_running_loop().time,
        identity=parts.identity,
        leader=lambda: leader.is_leader,
        state=state,
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, settings.host, settings.port).start()
    return runner


async def serve(
    settings: ScalerSettings,
    *,
    stop: asyncio.Event | None = None,
    started: Callable[[int], None] | None = None,
) -> None:
    """Run the scaler until ``stop`` is set (or SIGTERM/SIGINT when ``stop`` is None);
    ``started`` gets the bound port once the server listens (useful with port 0)."""
    if settings.token is None or not settings.token.get_secret_value():
        raise SettingsError(
            "token: the scaler needs a bearer token for /v1/stats and /v1/activate; "
            "set TIDAL_SCALER_TOKEN, --token-file or --token"
        )
    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    access = await connect(kubeconfig=settings.kube.kubeconfig, context=settings.kube.context)
    metrics = Metrics(CollectorRegistry())
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=settings.scrape.max_concurrent + 8)
    )
    tasks: list[asyncio.Task[None]] = []
    runner: web.AppRunner | None = None
    parts: _Scaler | None = None
    state = ServerState()
    try:
        parts = _compose(settings, access, session, metrics, loop.time)
        runner = await _listen(parts, settings, metrics, state)
        if started is not None:
            started(int(runner.addresses[0][1]))  # the bound port, when asked for port 0
        log.info(
            "tidal scaler %s listening on %s:%s (kubernetes: %s, lease %s/%s)",
            parts.identity,
            settings.host,
            settings.port,
            access.source,
            settings.leader.namespace or access.namespace,
            settings.leader.lease_name,
        )
        jobs = _jobs(parts, settings, loop.time)
        tasks = [asyncio.ensure_future(job) for _, job in jobs]
        for (name, _), task in zip(jobs, tasks, strict=True):
            task.set_name(f"tidal-scaler-{name}")
        await stop.wait()
        log.info("shutting down")
    finally:
        state.serving = False
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if runner is not None:
            await runner.cleanup()
        if parts is not None:
            await parts.warm.close()
            await parts.warm_events.close()
        await session.close()
        await access.close()


def run(args: argparse.Namespace) -> int:
    flags = flags_from_args(args)
    try:
        settings = load_settings(flags=flags, config_file=args.config)
    except SettingsError as exc:
        for line in str(exc).splitlines():
            print(f"tidal scaler: {line}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for warning in visible_secret_warnings(flags):
        log.warning("%s", warning)
    # The *_created series double every counter's series for a timestamp no
    # dashboard uses; the services are the only place that may say so
    # process-wide.
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(serve(settings))
    except (SettingsError, KubeConfigError) as exc:
        print(f"tidal scaler: {exc}", file=sys.stderr)
        return 2
    return 0
