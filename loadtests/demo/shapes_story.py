"""``tidal demo --story shapes``: from whole GPUs to slices as the load allows, and back.

Starts the sandbox (``tidal scaler`` and ``tidal activator`` as real
processes) on a modelled GPU cluster: one node of three whole H100s and one
node whose four H100s are each cut to one ``3g.40gb`` MIG slice. The
``tidal-shapes`` table prices an H100 at $12.29/h and a slice at $5.27/h
(docs/shapes.md says where the prices come from). The example fake-vLLM
model asks for an H100 in its template and lists ``h100`` and
``mig-3g.40gb``, with a target of 6 in flight per H100 (a slice takes 3/7
of that, the catalog's share of compute) and a pending-timeout of 10 s.
Closed-loop streaming chat completions go through the activator the whole
time:

1. **whole GPUs**: 12 streams; two H100s ($24.58/h) cost less than the five
   slices the load would need ($26.35/h), and the model runs on H100s;
2. **slices**: the load falls to 2 streams; one slice ($5.27/h) carries
   it, and the model moves there, the H100 kept until the slice is Ready;
3. **slices run out**: another tenant takes the three other slices and the
   load rises to 5 streams: the second slice the mix asks for stays
   Pending, and at the pending-timeout the shape is capped
   (``ShapeUnavailable``) and the model goes back to a whole H100.

Everything reported is observed: replicas from the cluster's store, the
mix and its hourly cost from the status annotation the scaler writes, the
Events from the store, requests on the client's clock. ``--json`` prints
one JSON line at the end. The exit status is 1 if any request failed or a
step did not happen as told.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from loadtests.demo.client import stream_chat
from loadtests.demo.observe import RequestResult
from loadtests.demo.session import INTERRUPTED, DemoSession
from loadtests.demo.view import Console
from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, EVENTS, SERVICES, _rtype
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.nodes import parse_nodes
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings

__all__ = ["CONFIGMAPS", "H100", "SHAPES_MODEL", "SLICE", "blocker", "run_shapes", "shape_table"]

CONFIGMAPS = _rtype("", "configmaps")
H100 = "NVIDIA-H100-80GB-HBM3"
SLICE = "mig-3g.40gb"
COMPANION = f"llama-{SLICE}"
PENDING_S = 10.0
PRICES = {"h100": 12.29, SLICE: 5.27}
NODES = parse_nodes(
    [
        {"name": "h100", "gpu": "H100-80GB", "gpus": 3, "zone": "us-east-1a"},
        {"name": "h100-mig", "gpu": "H100-80GB", "gpus": 4, "mig": {"3g.40gb": 1},
         "zone": "us-east-1a"},
    ]
)  # fmt: skip
SHAPES_MODEL = ExampleModel(
    max_scale=6,
    target_concurrency=6,
    startup_delay_s=2.0,
    window_s=6.0,
    scale_down_delay_s=4.0,
    grace_s=600.0,
    cold_start_timeout_s=120.0,
    extra_annotations={
        "placement.tidal.dev/shapes": f"h100,{SLICE}",
        # An 8B model's vLLM refuses to start on a 40 GB slice at its full context.
        f"placement.tidal.dev/shape-args.{SLICE}": "--max-model-len 32768",
        "placement.tidal.dev/pending-timeout": f"{PENDING_S:g}s",
    },
)


def shape_table(namespace: str = "default") -> dict[str, Any]:
    """The ``tidal-shapes`` ConfigMap of the story's two shapes."""
    data = {
        name: f"resource={'nvidia.com/gpu' if name == 'h100' else 'nvidia.com/' + name}, "
        f"gpu-product={H100}, on-demand={price:g}"
        for name, price in PRICES.items()
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "tidal-shapes",
            "namespace": namespace,
            "labels": {"tidal.dev/shapes": "true"},
        },
        "data": data,
    }


def blocker(slices: int, namespace: str = "default") -> dict[str, Any]:
    """Another tenant's Deployment holding ``slices`` slices (no server runs)."""
    labels = {"app": "other"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "other", "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": slices,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"sandbox.tidal.dev/process": "none"},
                },
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": H100},
                    "containers": [
                        {
                            "name": "batch",
                            "image": "batch:1",
                            "resources": {"limits": {f"nvidia.com/{SLICE}": "1"}},
                        }
                    ],
                },
            },
        },
    }


@dataclass(slots=True)
class Step:
    """What one step of the story reached: the mix it ended on, its cost, how long."""

    name: str
    mix: dict[str, int] = field(default_factory=dict)
    cost_per_hour: float | None = None
    took_s: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"mix": self.mix, "cost_per_hour": self.cost_per_hour, "took_s": self.took_s}


class ShapesRun:
    """One run of the story against a started stack."""

    def __init__(self, stack: SandboxStack, model: ExampleModel, console: Console) -> None:
        self.stack = stack
        self.model = model
        self.console = console
        self.t0 = time.monotonic()
        self.results: list[RequestResult] = []
        self.steps: list[Step] = []
        self.events: list[str] = []
        self._seen: set[str] = set()
        self._streams: list[tuple[asyncio.Task[None], asyncio.Event]] = []

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def event(self, text: str) -> None:
        self.console.event(f"[{self.elapsed():6.1f}s] {text}")

    # --- observation -----------------------------------------------------------

    def ready(self) -> dict[str, int]:
        """Ready replicas per shape, from the store."""
        out = {}
        for name, shape in ((self.model.name, "h100"), (COMPANION, SLICE)):
            _, ready, _ = self.stack.deployment_state(name, self.model.namespace)
            if ready:
                out[shape] = ready
        return out

    def status(self) -> dict[str, Any]:
        assert DEPLOYMENTS is not None
        obj = self.stack.cluster.store.peek(DEPLOYMENTS, self.model.namespace, self.model.name)
        raw = ((obj or {}).get("metadata", {}).get("annotations") or {}).get(
            "autoscaling.tidal.dev/status"
        )
        return json.loads(raw) if raw else {}

    def _narrate_events(self) -> None:
        assert EVENTS is not None
        items, _ = self.stack.cluster.store.list(EVENTS, namespace=self.model.namespace)
        for e in sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"])):
            involved = e.get("involvedObject") or {}
            if e["metadata"]["name"] in self._seen or involved.get("name") != self.model.name:
                continue
            if (e.get("source") or {}).get("component") != "tidal-scaler":
                continue
            self._seen.add(e["metadata"]["name"])
            self.events.append(str(e.get("reason")))
            self.event(f"Event {e.get('type')} {e.get('reason')}: {e.get('message')}")

    async def _until(self, what: str, check: Callable[[], bool], timeout_s: float) -> float | None:
        started = time.monotonic()
        last: dict[str, int] = {}
        while time.monotonic() - started < timeout_s:
            self._narrate_events()
            ready = self.ready()
            if ready != last:
                self.event(f"ready: {_mix(ready)}")
                last = ready
            if check():
                return time.monotonic() - started
            await asyncio.sleep(0.25)
        self.event(f"gave up waiting {timeout_s:g}s for {what}")
        return None

    # --- load ------------------------------------------------------------------

    async def _stream(self, client: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        while not stop.is_set():
            result = await stream_chat(
                client,
                self.stack.addresses.activator_url,
                model=self.model.model,
                max_tokens=32,
                clock_start_s=self.t0,
            )
            self.results.append(result)
            if not result.ok:
                self.event(f"request FAILED: HTTP {result.status} {result.error}")
                await asyncio.sleep(0.2)

    def load(self, client: aiohttp.ClientSession, streams: int) -> None:
        """Keep ``streams`` closed-loop streams going (those stopped finish their request)."""
        while len(self._streams) > streams:
            _, stop = self._streams.pop()
            stop.set()
        while len(self._streams) < streams:
            stop = asyncio.Event()
            task = asyncio.create_task(self._stream(client, stop), name="shapes-stream")
            self._streams.append((task, stop))

    # --- the story -------------------------------------------------------------

    async def _step(
        self, name: str, what: str, want: dict[str, int], timeout_s: float, *, hold_s: float = 0.0
    ) -> bool:
        """Until ``want`` runs and is what the scaler asks for (at ``hold_s`` at the
        earliest: the scaler has seen the load for that long)."""
        step = Step(name)
        self.steps.append(step)
        began = time.monotonic()
        step.took_s = await self._until(
            what,
            lambda: (
                time.monotonic() - began >= hold_s
                and self.ready() == want
                and self.status().get("shapes") == want
            ),
            timeout_s,
        )
        doc = self.status()
        step.mix, step.cost_per_hour = dict(doc.get("shapes") or {}), doc.get("costPerHour")
        if step.took_s is None:
            return False
        self.event(f"{what}: {_mix(step.mix)} at ${step.cost_per_hour}/h")
        return True

    async def play(self) -> None:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=60.0),
        ) as client:
            try:
                await self._play(client)
            finally:
                streams = [task for task, _ in self._streams]
                self.load(client, 0)
                await asyncio.gather(*streams, return_exceptions=True)
                self.console.close()

    async def _play(self, client: aiohttp.ClientSession) -> None:
        self.event("1/3 whole GPUs: 12 streams (6 in flight per H100, 3/7 of that per slice)")
        self.load(client, 12)
        # Three stable windows of the load: the scaler compares shapes after the first.
        hold_s = 3 * self.model.window_s
        if not await self._step("whole", "on whole GPUs", {"h100": 2}, 120.0, hold_s=hold_s):
            return
        self.event("2/3 slices: the load falls to 2 streams")
        self.load(client, 2)
        if not await self._step("slices", "moved to a slice", {SLICE: 1}, 120.0):
            return
        self.event("3/3 slices run out: another tenant takes the 3 free slices; 5 streams")
        assert DEPLOYMENTS is not None
        other = blocker(3, self.model.namespace)
        apply_defaults(other, "Deployment", creating=True)
        self.stack.cluster.store.create(DEPLOYMENTS, other)
        self.load(client, 5)
        await self._step("back", "back on a whole GPU", {"h100": 1}, 120.0)


def _mix(replicas: dict[str, int]) -> str:
    return ", ".join(f"{n} x {s}" for s, n in sorted(replicas.items())) or "none"


def _summary(run: ShapesRun, problems: list[str], wall_s: float) -> str:
    ok = sum(1 for r in run.results if r.ok)
    lines = ["", "step      mix                 $/hour   took"]
    for step in run.steps:
        took = "-" if step.took_s is None else f"{step.took_s:.1f}s"
        cost = "-" if step.cost_per_hour is None else f"{step.cost_per_hour:.2f}"
        lines.append(f"{step.name:<9} {_mix(step.mix):<19} {cost:>7}   {took}")
    lines.append(f"requests: {ok} answered 200, {len(run.results) - ok} failed; {wall_s:.0f}s")
    lines += [f"PROBLEM: {p}" for p in problems] or ["the story happened as told"]
    return "\n".join(lines)


async def run_shapes(args: argparse.Namespace) -> int:
    """The shapes story, from ``tidal demo --story shapes``."""
    model = SHAPES_MODEL
    session = DemoSession.open(args)
    settings = StackSettings(example=None, nodes=NODES, scaler_args=("--tick-interval-s", "1"))
    stack = SandboxStack(session.directory, settings)
    run: ShapesRun | None = None

    async def play() -> None:
        nonlocal run
        assert CONFIGMAPS is not None
        assert DEPLOYMENTS is not None
        assert SERVICES is not None
        store = stack.cluster.store
        store.create(CONFIGMAPS, shape_table(model.namespace))
        deployment = model.deployment()
        deployment["spec"]["replicas"] = 2
        deployment["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": H100}
        service = model.service()
        for kind, obj in (("Service", service), ("Deployment", deployment)):
            apply_defaults(obj, kind, creating=True)
        store.create(SERVICES, service)
        store.create(DEPLOYMENTS, deployment)
        session.console.event(
            f"Up in {session.elapsed():.1f}s: {model.target} on two H100s, listing "
            f"h100 (${PRICES['h100']}/h) and {SLICE} (${PRICES[SLICE]}/h)"
        )
        run = ShapesRun(stack, model, session.console)
        await run.play()

    failure = await session.play(
        stack,
        "Starting the sandbox: an emulated cluster with three whole H100s and four H100 "
        f"MIG slices, tidal scaler and tidal activator (in {session.directory})",
        play,
    )
    if failure is None:
        return INTERRUPTED
    wall_s = session.elapsed()
    problems = [failure] if failure else []
    if run is None:
        problems.append("the story did not start")
    else:
        failed = sum(1 for r in run.results if not r.ok)
        if failed:
            problems.append(f"{failed} request(s) failed")
        problems += [f"step {s.name} did not happen" for s in run.steps if s.took_s is None]
        if len(run.steps) < 3:
            problems.append("the story stopped early")
        elif "ShapeUnavailable" not in run.events:
            problems.append("no ShapeUnavailable Event")
    if run is not None:
        print(_summary(run, problems, wall_s), file=session.human, flush=True)
    doc: dict[str, Any] = {
        "wall_s": round(wall_s, 3),
        "steps": {s.name: s.as_json() for s in run.steps} if run else {},
        "requests": {
            "ok": sum(1 for r in run.results if r.ok) if run else 0,
            "failed": sum(1 for r in run.results if not r.ok) if run else 0,
        },
        "events": run.events if run else [],
    }
    if failure:
        doc["error"] = failure
    return session.finish(problems, doc)
