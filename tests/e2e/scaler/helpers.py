"""Shared pieces of the scaler's end-to-end tests: a stack that always stops, and readers.

- :func:`running_stack`: a :class:`SandboxStack` (real ``tidal scaler`` and
  ``tidal activator`` processes on the emulated cluster) that is stopped, with
  every process it started, whatever the test does;
- :func:`model`: the example Deployment, with the knobs the tests shorten and
  optionally process-less pods (Running and Ready without a fake server, for
  tests that need replicas but no traffic);
- :class:`Reporter`: a synthetic activator posting ``/v1/stats`` in the shape
  of docs/architecture.md, "The activator" to one or several scalers, every 0.5 s, until stopped;
- readers straight from the cluster's store: Events of a Deployment, its
  status annotation, the Lease holder; and :func:`wait_until`, bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from groundwork.rules.stats_report import ActivatorReport, TargetStats, report_json
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings

EVENTS = by_group_version_plural("", "v1", "events")
LEASES = by_group_version_plural("coordination.k8s.io", "v1", "leases")
DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
SERVICES = by_group_version_plural("", "v1", "services")
STATUS = "autoscaling.tidal.dev/status"


@contextlib.asynccontextmanager
async def running_stack(directory: Path, settings: StackSettings) -> AsyncIterator[SandboxStack]:
    stack = SandboxStack(directory, settings)
    try:
        await stack.start()
        yield stack
    finally:
        await stack.stop()


def model(
    *,
    replicas: int = 0,
    processes: bool = True,
    drop: Sequence[str] = (),
    **knobs: Any,
) -> tuple[ExampleModel, dict[str, Any]]:
    """The example model and its Deployment (``replicas`` at start, annotations in ``drop``
    removed; ``processes=False``: pods run no fake server and are ready at once)."""
    example = ExampleModel(**knobs)
    deployment = example.deployment()
    deployment["spec"]["replicas"] = replicas
    for key in drop:
        deployment["metadata"]["annotations"].pop(key, None)
    if not processes:
        pod_annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        pod_annotations["sandbox.tidal.dev/process"] = "none"
        pod_annotations["sandbox.tidal.dev/startup-delay"] = "0s"
        deployment["metadata"]["annotations"]["autoscaling.tidal.dev/engine"] = "generic"
    return example, deployment


def apply(stack: SandboxStack, example: ExampleModel, deployment: dict[str, Any]) -> None:
    """Create the Deployment and its Service in the store, defaulted as the API would."""
    assert DEPLOYMENTS is not None
    assert SERVICES is not None
    for rtype, obj in ((SERVICES, example.service()), (DEPLOYMENTS, deployment)):
        apply_defaults(obj, rtype.kind, creating=True)
        stack.cluster.store.create(rtype, obj)


def events(stack: SandboxStack, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    """Core Events about Deployment ``name``, oldest first."""
    assert EVENTS is not None
    items, _ = stack.cluster.store.list(EVENTS, namespace=namespace)
    got = [
        e
        for e in items
        if e.get("involvedObject", {}).get("kind") == "Deployment"
        and e["involvedObject"].get("name") == name
    ]
    return sorted(got, key=lambda e: int(e["metadata"]["resourceVersion"]))


def reasons(stack: SandboxStack, name: str) -> list[str]:
    return [
        e["reason"]
        for e in events(stack, name)
        if e.get("source", {}).get("component") == "tidal-scaler"
    ]


def status(stack: SandboxStack, name: str, namespace: str = "default") -> dict[str, Any] | None:
    assert DEPLOYMENTS is not None
    obj = stack.cluster.store.peek(DEPLOYMENTS, namespace, name)
    raw = (obj or {}).get("metadata", {}).get("annotations", {}).get(STATUS)
    return json.loads(raw) if raw else None


def lease_holder(stack: SandboxStack, namespace: str = "default") -> str | None:
    assert LEASES is not None
    lease = stack.cluster.store.peek(LEASES, namespace, "tidal-scaler")
    if lease is None:
        return None
    return lease.get("spec", {}).get("holderIdentity") or None


async def wait_until(
    predicate: Callable[[], bool], *, timeout_s: float, what: str, every_s: float = 0.1
) -> float:
    """Poll ``predicate`` until true; the seconds it took. Fails naming ``what``."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while not predicate():
        if loop.time() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s:.0f}s: {what}")
        await asyncio.sleep(every_s)
    return loop.time() - started


class Reporter:
    """A synthetic activator: posts ``concurrency`` for one target to every URL."""

    def __init__(self, urls: Sequence[str], token: str, target: str) -> None:
        self.urls = list(urls)
        self.token = token
        self.target = target
        self.concurrency = 0.0
        self.paused = False
        self.answers: list[int] = []
        self._task: asyncio.Task[None] | None = None

    def body(self) -> dict[str, Any]:
        c = self.concurrency
        stats = TargetStats(concurrency=c, in_flight=round(c), buffered=0, arrivals=round(c))
        report = ActivatorReport(
            activator="e2e-reporter", period_s=1.0, targets={self.target: stats}
        )
        return report_json(report)

    async def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                if not self.paused:
                    for url in self.urls:
                        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                            async with session.post(
                                f"{url}/v1/stats", json=self.body(), headers=headers
                            ) as resp:
                                self.answers.append(resp.status)
                await asyncio.sleep(0.5)

    async def __aenter__(self) -> Reporter:
        self._task = asyncio.create_task(self._run(), name="e2e-reporter")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
