"""``tidal demo --story spot``: a spot preemption under streaming load, with no failed request.

Starts a :class:`~loadtests.sandbox.stack.SandboxStack` (the emulated
cluster with spot and on-demand GPU nodes in two zones, ``tidal scaler`` and
``tidal activator`` as real processes) with the example fake-vLLM model
annotated ``placement.tidal.dev/policy: spot-with-on-demand-baseline`` and a
baseline of one, then tells the story through the activator:

1. **load**: closed-loop streaming chat completions, far above the
   per-replica target, until the model runs four replicas: one on demand
   (the user's Deployment, pinned to on-demand nodes) and three on spot (the
   companion ``<name>-spot``, spread over the zones);
2. **notice**: a spot node running a replica is preempted the way a cloud
   does it (``tidal sandbox preempt --notice``): its notice taint, then after
   the notice its pods evicted and the node removed. The scaler covers with
   on-demand at once (Event ``SpotFallback``); the activator sends no new
   request to the noticed replica and lets the ones in flight finish;
3. **recovery**: the replacement spot replica starts on another spot node;
   once it is Ready and the release hold has passed, on-demand goes back to
   the baseline (Event ``SpotRecovered``);
4. **cost**: the scaler's cost rate and what spot saves against all
   on-demand, from its ``GET /v1/targets``.

Everything reported is observed: replica counts from the cluster's store,
Events from the store, requests on the client's clock, cost from the
scaler. ``--json`` prints one JSON line on stdout at the end (the story goes
to stderr). The exit status is 1 if any request failed, or if the story did
not happen as told (no four replicas, no cover, no recovery).

Main sizing decision: 12 streams against a target concurrency of 2 per
replica and ``max-scale`` 4, so even a loaded two-core machine keeping
fewer streams open than it tries to asks for four replicas; a long
scale-down delay keeps them while the story runs, and the release hold is
5 s (the default is 60 s) so the return to the baseline fits in the demo.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import aiohttp

from loadtests.demo.activator_gauges import HeldRequests, read_gauges
from loadtests.demo.client import stream_chat
from loadtests.demo.session import INTERRUPTED, DemoSession
from loadtests.demo.spot_figures import Half, SpotFigures, summary_table
from loadtests.demo.view import Console, Status
from loadtests.sandbox.cluster.controllers.base import EVENTS, NODES, PODS
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings

__all__ = ["SPOT_MODEL", "SpotRun", "SpotStory", "configure_spot", "run_spot"]

POLICY = "spot-with-on-demand-baseline"
CAPACITY_LABEL = "placement.tidal.dev/capacity-type"
ZONE = "topology.kubernetes.io/zone"
RELEASE_HOLD_S = 5.0

SPOT_MODEL = ExampleModel(
    min_scale=1,
    max_scale=4,
    target_concurrency=2,
    startup_delay_s=3.0,
    window_s=6.0,
    scale_down_delay_s=600.0,
    grace_s=600.0,
    cold_start_timeout_s=120.0,
    extra_annotations={
        "placement.tidal.dev/policy": POLICY,
        "placement.tidal.dev/on-demand-baseline": "1",
        "placement.tidal.dev/pending-timeout": "30s",
    },
)


@dataclass(frozen=True, slots=True)
class SpotStory:
    streams: int = 12
    notice_s: float = 10.0
    max_tokens: int = 32
    up_timeout_s: float = 120.0
    recover_timeout_s: float = 120.0
    sample_interval_s: float = 0.25


def configure_spot(parser: argparse.ArgumentParser) -> None:
    """The flags of the spot story (the default story ignores them)."""
    group = parser.add_argument_group("the spot story (--story spot)")
    defaults = SpotStory()
    group.add_argument(
        "--streams",
        type=int,
        metavar="N",
        default=defaults.streams,
        help=f"concurrent streams of the load (default {defaults.streams})",
    )
    group.add_argument(
        "--notice-s",
        type=float,
        metavar="SECONDS",
        default=defaults.notice_s,
        help=f"interruption notice of the preemption (default {defaults.notice_s:g})",
    )


def _story_from_args(args: argparse.Namespace) -> SpotStory:
    story = SpotStory(streams=args.streams, notice_s=args.notice_s)
    if story.streams < 1:
        raise ValueError(f"--streams must be 1 or more, got {story.streams}")
    if not 1.0 <= story.notice_s <= 300.0:
        raise ValueError(f"--notice-s must be 1 to 300 seconds, got {story.notice_s:g}")
    return story


class SpotRun:
    """One run of the spot story against a started stack."""

    def __init__(
        self, stack: SandboxStack, model: ExampleModel, story: SpotStory, console: Console
    ) -> None:
        self.stack = stack
        self.model = model
        self.story = story
        self.console = console
        self.figures = SpotFigures()
        self.t0 = time.monotonic()
        self.phase = "start"
        self.on_demand = Half()
        self.spot = Half()
        self._seen_events: set[str] = set()
        self.held: HeldRequests | None = None
        self._notice_at: float | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def event(self, text: str) -> None:
        self.console.event(f"[{self.elapsed():6.1f}s] {text}")

    # --- observation -----------------------------------------------------------

    def _half(self, name: str) -> Half:
        desired, ready, _ = self.stack.deployment_state(name, self.model.namespace)
        pods = len(self._pods(spot=name.endswith("-spot")))
        return Half(desired, ready, pods)

    def _pods(self, *, spot: bool) -> list[dict[str, Any]]:
        assert PODS is not None
        items, _ = self.stack.cluster.store.list(PODS, namespace=self.model.namespace, copy=False)
        return [
            p
            for p in items
            if (p["metadata"].get("labels") or {}).get("app") == self.model.name
            and ((p["metadata"].get("labels") or {}).get(CAPACITY_LABEL) == "spot") is spot
        ]

    def sample(self) -> None:
        od, spot = self._half(self.model.name), self._half(f"{self.model.name}-spot")
        before = (self.on_demand.desired, self.on_demand.ready, self.spot.desired, self.spot.ready)
        if (od.desired, od.ready, spot.desired, spot.ready) != before:
            self.event(
                f"on-demand {od.ready} ready of {od.desired} asked, "
                f"spot {spot.ready} ready of {spot.desired} asked"
            )
        self.on_demand, self.spot = od, spot
        self.figures.peak_on_demand = max(self.figures.peak_on_demand, od.ready)
        self.figures.peak_spot = max(self.figures.peak_spot, spot.ready)
        if self._notice_at is not None:
            since = self.elapsed() - self._notice_at
            if self.figures.fallback_s is None and od.desired > 1:
                self.figures.fallback_s = since
            if self.figures.cover_ready_s is None and od.ready > 1:
                self.figures.cover_ready_s = since
            if (
                self.figures.fallback_s is not None
                and self.figures.recovered_s is None
                and od.desired == 1
            ):
                self.figures.recovered_s = since
        self._narrate_events()

    def _narrate_events(self) -> None:
        assert EVENTS is not None
        items, _ = self.stack.cluster.store.list(EVENTS, namespace=self.model.namespace)
        for e in sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"])):
            key = e["metadata"]["name"]
            involved = e.get("involvedObject") or {}
            if key in self._seen_events or involved.get("name") != self.model.name:
                continue
            if (e.get("source") or {}).get("component") != "tidal-scaler":
                continue
            self._seen_events.add(key)
            self.figures.events.append(str(e.get("reason")))
            self.event(f"Event {e.get('type')} {e.get('reason')}: {e.get('message')}")

    def status(self) -> Status:
        results = self.figures.results
        now = self.elapsed()
        recent = [
            r.ttft_s
            for r in results
            if r.ok and r.ttft_s is not None and now - (r.started_s + r.total_s) <= 5.0
        ]
        return Status(
            elapsed_s=now,
            phase=self.phase,
            desired=self.on_demand.desired + self.spot.desired,
            ready=self.on_demand.ready + self.spot.ready,
            pods=self.on_demand.pods + self.spot.pods,
            buffered=self.held.buffered if self.held else None,
            in_flight=self.held.in_flight if self.held else None,
            done=sum(1 for r in results if r.ok),
            failed=sum(1 for r in results if not r.ok),
            recent_ttft_s=statistics.median(recent) if recent else None,
            note=(
                f"on-demand {self.on_demand.ready}/{self.on_demand.desired} "
                f"spot {self.spot.ready}/{self.spot.desired}"
            ),
        )

    async def _sample_forever(self) -> None:
        admin_url = self.stack.addresses.activator_admin_url
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3.0)) as session:
            while True:
                self.sample()
                self.held = await read_gauges(session, admin_url, self.model.target)
                await asyncio.sleep(self.story.sample_interval_s)

    async def _show_forever(self) -> None:
        period_s = 0.25 if self.console.tty else 1.0
        while True:
            await asyncio.sleep(period_s)
            self.console.status(self.status())

    async def _until(self, what: str, check: Any, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if check():
                return True
            await asyncio.sleep(0.1)
        self.event(f"gave up waiting {timeout_s:g}s for {what}")
        return False

    # --- the story -------------------------------------------------------------

    async def play(self) -> None:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=60.0),
        ) as client:
            self.sample()
            stop = asyncio.Event()
            tasks = [
                asyncio.create_task(self._sample_forever(), name="spot-sampler"),
                asyncio.create_task(self._show_forever(), name="spot-view"),
                *(
                    asyncio.create_task(self._stream(client, stop), name=f"spot-stream-{i}")
                    for i in range(self.story.streams)
                ),
            ]
            try:
                if await self._load():
                    await self._preempt()
            finally:
                stop.set()
                streams = tasks[2:]
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.gather(*streams), 60.0)
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self.console.close()
            self.sample()
            self.figures.final_on_demand, self.figures.final_spot = self.on_demand, self.spot
            await self._cost()

    async def _stream(self, client: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        while not stop.is_set():
            result = await stream_chat(
                client,
                self.stack.addresses.activator_url,
                model=self.model.model,
                max_tokens=self.story.max_tokens,
                clock_start_s=self.t0,
            )
            self.figures.results.append(result)
            if not result.ok:
                self.event(f"request FAILED: HTTP {result.status} {result.error}")
                await asyncio.sleep(0.2)  # a failing activator is not hammered

    async def _load(self) -> bool:
        self.phase = "load"
        self.event(
            f"1/4 load: {self.story.streams} concurrent streams through the activator "
            f"(target {self.model.target_concurrency} per replica, max {self.model.max_scale}); "
            f"policy {POLICY}, on-demand baseline 1"
        )
        up = await self._until(
            "one on-demand and three spot replicas",
            lambda: self.on_demand.ready >= 1 and self.spot.ready >= 3,
            self.story.up_timeout_s,
        )
        if not up:
            return False
        zones: Counter[str] = Counter()
        assert NODES is not None
        for pod in self._pods(spot=True):
            node = self.stack.cluster.store.peek(NODES, "", pod["spec"].get("nodeName") or "")
            zones[((node or {}).get("metadata", {}).get("labels") or {}).get(ZONE, "?")] += 1
        self.figures.zones = dict(zones)
        self.event(
            "four replicas: 1 on-demand, 3 spot across zones "
            + ", ".join(f"{z}: {n}" for z, n in sorted(zones.items()))
        )
        return True

    async def _preempt(self) -> None:
        self.phase = "notice"
        running = [p for p in self._pods(spot=True) if p["spec"].get("nodeName") and _ready(p)]
        node = str(running[0]["spec"]["nodeName"])
        self.figures.preempted_node = node
        self.event(
            f"2/4 notice: the cloud takes spot node {node} back with {self.story.notice_s:g}s "
            "of notice (taint, then eviction, then the node is gone); the activator stops "
            "sending it new requests, the scaler covers with on-demand"
        )
        plane = self.stack.cluster.plane
        assert plane is not None
        self._notice_at = self.elapsed()
        preemption = asyncio.create_task(plane.nodes.preempt(node, notice_s=self.story.notice_s))

        def gone(task: asyncio.Task[Any]) -> None:
            if not task.cancelled() and task.exception() is None:
                evicted = len(task.result().pods_deleted)
                self.event(f"node {node} is gone ({evicted} pod(s) evicted after the notice)")

        preemption.add_done_callback(gone)
        try:
            self.phase = "cover"
            await self._until(
                "on-demand cover", lambda: self.figures.cover_ready_s is not None, 60.0
            )
            self.phase = "recovery"
            self.event(
                "3/4 recovery: the replacement spot replica starts on another spot node; "
                f"on-demand goes back to the baseline once it is Ready for {RELEASE_HOLD_S:g}s"
            )
            await self._until(
                "on-demand back at the baseline",
                lambda: (
                    self.figures.recovered_s is not None
                    and self.on_demand.ready == 1
                    and self.spot.ready >= 3
                ),
                self.story.recover_timeout_s,
            )
        except BaseException:
            # Interrupted: the sandbox is about to stop; do not sit out the notice.
            preemption.cancel()
            await asyncio.gather(preemption, return_exceptions=True)
            raise
        await preemption
        self.figures.preemptions += 1

    async def _cost(self) -> None:
        self.phase = "cost"
        url = f"{self.stack.addresses.scaler_url}/v1/targets"
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
                session.get(url) as resp,
            ):
                body = await resp.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            self.event(f"4/4 cost: the scaler's /v1/targets could not be read ({exc!r})")
            return
        for target in body.get("targets") or ():
            if target.get("target") == self.model.target and target.get("cost"):
                self.figures.cost = dict(target["cost"])
        cost = self.figures.cost
        if cost:
            self.event(
                f"4/4 cost: ${cost['dollars_per_hour']:.2f}/h now, saving "
                f"${cost['saving_dollars_per_hour']:.2f}/h against all on-demand "
                f"(${cost['saved_dollars']:.4f} saved during the demo)"
            )


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def run_spot(args: argparse.Namespace) -> int:
    """The spot story, from ``tidal demo --story spot`` (flags parsed by the demo)."""
    try:
        story = _story_from_args(args)
    except ValueError as exc:
        print(f"tidal demo: {exc}", file=sys.stderr)
        return 2
    model = SPOT_MODEL
    session = DemoSession.open(args)
    settings = StackSettings(
        example=model,
        scaler_args=("--tick-interval-s", "1"),
        scaler_env={"TIDAL_SCALER_PLACEMENT__RELEASE_HOLD_S": f"{RELEASE_HOLD_S:g}"},
    )
    stack = SandboxStack(session.directory, settings)
    run: SpotRun | None = None

    async def play() -> None:
        nonlocal run
        session.console.event(
            f"Up in {session.elapsed():.1f}s: {model.target} with "
            f"placement.tidal.dev/policy={POLICY}, one replica on demand"
        )
        run = SpotRun(stack, model, story, session.console)
        await run.play()

    failure = await session.play(
        stack,
        "Starting the sandbox: an emulated cluster with spot and on-demand GPU nodes in two "
        f"zones, tidal scaler and tidal activator (in {session.directory})",
        play,
    )
    if failure is None:
        return INTERRUPTED
    wall_s = session.elapsed()
    figures = run.figures if run is not None else SpotFigures()
    problems = figures.problems() + ([failure] if failure else [])
    print(summary_table(figures, problems, wall_s), file=session.human, flush=True)
    doc = figures.as_json()
    doc["wall_s"] = round(wall_s, 3)
    if failure:
        doc["error"] = failure
    return session.finish(problems, doc)
