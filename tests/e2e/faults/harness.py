"""The fault suite's stage: a sandbox with two activators, the load client, and the faults.

- :func:`fault_stack`: a :class:`SandboxStack` (the emulated cluster, the real
  ``tidal scaler`` and TWO real ``tidal activator`` processes) with the
  example model shortened for CI (1 s cold start, 6 s window, 2 s grace,
  short drain), always stopped with every process it started;
- :class:`Load`: the load client (:mod:`tests.e2e.faults.load_client`) as a
  child process, steered line by line, killed if the test fails;
- the faults, each done the way the outside world does it: a replica's
  process SIGKILLed and a node preempted through the sandbox's admin
  endpoint (``tidal sandbox preempt`` uses the same one), a pod deleted
  gracefully (as ``kubectl delete pod``), the scaler SIGKILLed and started
  again, the API server made unavailable and its watches cut with
  compaction (its fault injection), an activator SIGTERMed;
- readers of the model's state (ready pods, replicas) straight from the
  cluster's store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from loadtests.sandbox.cluster.admin import read_admin_file
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings, TidalProcess
from tests.e2e.faults.fates import Record, Tally

PODS = by_group_version_plural("", "v1", "pods")
DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
REPO = Path(__file__).resolve().parents[3]

# What every activator of the suite runs with: probes often, drains briefly.
DRAIN_S = 2.0
DRAIN_GRACE_S = 0.3
# How long after an activator's SIGTERM the load still sends it requests.
ENDPOINTS_DROP_S = 0.15
ACTIVATOR_ARGS = (
    "--probe-interval-s", "0.05",
    "--timeouts-drain-s", str(DRAIN_S),
    "--timeouts-drain-grace-s", str(DRAIN_GRACE_S),
    "--log-level", "INFO",
)  # fmt: skip
MAX_BUFFERED = 5
# Tokens per streamed completion: long enough that faults meet streams in progress.
MAX_TOKENS = 120


def example_model(*, min_scale: int, startup_delay_s: float = 1.0) -> ExampleModel:
    """The example fake-vLLM model, shortened; ``min_scale`` is also its starting replicas."""
    return ExampleModel(
        startup_delay_s=startup_delay_s,
        min_scale=min_scale,
        max_scale=4,
        target_concurrency=6,
        window_s=6.0,
        scale_down_delay_s=0.0,
        grace_s=2.0,
        # A request left waiting this long is a visible 504, not a hung test.
        cold_start_timeout_s=30.0,
        extra_annotations={"routing.tidal.dev/max-buffered": str(MAX_BUFFERED)},
    )


class Load:
    """The load client process: ``send`` commands, ``finish`` for the records."""

    def __init__(self, urls: list[str], model: str, *, rate: float, log: Path) -> None:
        self.config = {"urls": urls, "model": model, "max_tokens": MAX_TOKENS, "rate": rate}
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        with self.log.open("ab") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.e2e.faults.load_client", json.dumps(self.config),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                cwd=REPO, env=env,
            )  # fmt: skip
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        if line.strip() != b"started":
            raise RuntimeError(f"the load client did not start: {line!r}; see {self.log}")

    async def send(self, command: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()

    async def finish(self, timeout_s: float = 60.0) -> list[Record]:
        """Stop sending, wait for every outstanding request, and return every record."""
        await self.send("stop")
        assert self.proc is not None and self.proc.stdout is not None
        out = await asyncio.wait_for(self.proc.stdout.read(), timeout_s)
        await self.proc.wait()
        lines = out.decode().strip().splitlines()
        if self.proc.returncode != 0 or not lines:
            raise RuntimeError(
                f"the load client exited {self.proc.returncode}; see {self.log}:\n"
                + self.log.read_text(errors="replace")[-2000:]
            )
        return [Record.from_json(r) for r in json.loads(lines[-1])["records"]]

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


class FaultStack:
    """The stack, its two activators, the model, and the faults to strike at them."""

    def __init__(self, stack: SandboxStack, example: ExampleModel) -> None:
        self.stack = stack
        self.example = example
        self.loads: list[Load] = []

    @property
    def activators(self) -> list[TidalProcess]:
        return self.stack.activators

    # --- load ----------------------------------------------------------------------------

    async def load(self, rate: float) -> Load:
        urls = [self.stack.addresses.activator_url_of(i) for i in range(len(self.activators))]
        load = Load(
            urls,
            self.example.model,
            rate=rate,
            log=self.stack.directory / "logs" / f"load-{len(self.loads)}.log",
        )
        self.loads.append(load)
        await load.start()
        return load

    # --- observation ---------------------------------------------------------------------

    def pods(self) -> list[dict[str, Any]]:
        """The model's pods that exist and are not being deleted."""
        assert PODS is not None
        items, _ = self.stack.cluster.store.list(PODS, namespace=self.example.namespace)
        return [
            p
            for p in items
            if p["metadata"].get("labels", {}).get("app") == self.example.name
            and not p["metadata"].get("deletionTimestamp")
        ]

    def ready_pods(self) -> list[dict[str, Any]]:
        return [
            p
            for p in self.pods()
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in p.get("status", {}).get("conditions") or ()
            )
        ]

    async def wait_until(self, predicate: Any, *, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout_s:.0f}s: {what}")
            await asyncio.sleep(0.1)

    async def wait_ready(self, count: int, timeout_s: float = 30.0) -> None:
        await self.wait_until(
            lambda: len(self.ready_pods()) >= count,
            timeout_s=timeout_s,
            what=f"{count} ready replicas of {self.example.target}",
        )

    async def wait_zero(self, timeout_s: float = 40.0) -> None:
        await self.wait_until(
            lambda: self.stack.deployment_state(self.example.name) == (0, 0, 0),
            timeout_s=timeout_s,
            what=f"{self.example.target} scaled to zero (no replica, no pod)",
        )

    async def endpoints_seen(self) -> list[float]:
        """Each activator's ``tidal_activator_endpoints_ready`` for the model (its own view)."""
        seen = []
        timeout = aiohttp.ClientTimeout(total=2)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for index in range(len(self.activators)):
                url = f"{self.stack.addresses.activator_admin_url_of(index)}/metrics"
                async with session.get(url) as resp:
                    text = await resp.text()
                pattern = (
                    rf'^tidal_activator_endpoints_ready{{target="{self.example.target}"}} (\S+)$'
                )
                match = re.search(pattern, text, re.M)
                seen.append(float(match.group(1)) if match else 0.0)
        return seen

    async def wait_activators_see(self, count: int, timeout_s: float = 20.0) -> None:
        """Until every activator counts ``count`` ready endpoints: after an API outage
        their watches retry with back-off (up to 10 s), so they may still be catching up."""
        deadline = time.monotonic() + timeout_s
        while (seen := await self.endpoints_seen()) != [float(count)] * len(self.activators):
            if time.monotonic() > deadline:
                raise AssertionError(f"activators see {seen} ready endpoints, not {count}")
            await asyncio.sleep(0.2)

    def set_annotation(self, key: str, value: str, *, pods: bool = False) -> None:
        """As ``kubectl annotate --overwrite`` (``pods``: of the pod template, as
        ``kubectl patch``): one write that the scaler, the activators and the
        deployment controller watch."""
        assert DEPLOYMENTS is not None
        store = self.stack.cluster.store
        obj = store.peek(DEPLOYMENTS, self.example.namespace, self.example.name)
        assert obj is not None
        obj = json.loads(json.dumps(obj))
        meta = obj["spec"]["template"]["metadata"] if pods else obj["metadata"]
        meta["annotations"][key] = value
        store.update(DEPLOYMENTS, obj)

    # --- faults ----------------------------------------------------------------------------

    async def _admin(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        admin = read_admin_file(self.stack.directory)
        timeout = aiohttp.ClientTimeout(total=120)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(
                f"{admin['url']}{path}",
                json=body or {},
                headers={"Authorization": f"Bearer {admin['token']}"},
            ) as resp,
        ):
            answer: dict[str, Any] = await resp.json()
            if resp.status != 200:
                raise AssertionError(f"sandbox admin {path}: {resp.status} {answer}")
            return answer

    async def kill_replica(self) -> str:
        """SIGKILL one ready replica's server process (the kubelet restarts it later)."""
        pod = self.ready_pods()[0]["metadata"]
        await self._admin(f"/pods/{pod['namespace']}/{pod['name']}/crash")
        return str(pod["name"])

    def delete_replica(self) -> str:
        """Delete one ready replica with its grace period, as ``kubectl delete pod`` does."""
        assert PODS is not None
        pod = self.ready_pods()[0]["metadata"]
        self.stack.cluster.store.delete(PODS, pod["namespace"], pod["name"])
        return str(pod["name"])

    async def preempt_node_of_a_replica(self, notice_s: float) -> asyncio.Task[dict[str, Any]]:
        """Preempt the node of one ready replica, with notice; the task ends when it is gone."""
        node = str(self.ready_pods()[0]["spec"]["nodeName"])
        return asyncio.create_task(
            self._admin("/preempt", {"node": node, "notice_s": notice_s}), name="preempt"
        )

    async def kill_and_restart_scaler(self, down_s: float) -> None:
        scaler = self.stack.scaler
        assert scaler is not None and scaler.proc is not None
        scaler.signal(signal.SIGKILL)
        await scaler.proc.wait()
        await asyncio.sleep(down_s)
        await self.stack.restart(scaler)

    async def api_unavailable(self, duration_s: float) -> None:
        """Refuse every connection to the API server for ``duration_s`` (watches cut too)."""
        api = self.stack.cluster.api
        assert api is not None
        await api.make_unavailable(duration_s, refuse_connections=True)

    async def api_back(self) -> None:
        """End the API server's outage now."""
        api = self.stack.cluster.api
        assert api is not None
        await api.restore()

    async def readyz(self, index: int) -> int | None:
        """Activator ``index``'s ``/readyz`` status; None while nothing answers."""
        timeout = aiohttp.ClientTimeout(total=2)
        url = f"{self.stack.addresses.activator_admin_url_of(index)}/readyz"
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
                return resp.status
        return None

    async def wait_answering(self, index: int, timeout_s: float = 30.0) -> None:
        """Until activator ``index``'s admin port answers ``/readyz``, ready or not."""
        deadline = time.monotonic() + timeout_s
        while await self.readyz(index) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"activator {index} did not answer within {timeout_s:.0f}s")
            await asyncio.sleep(0.1)

    def cut_watches_with_compaction(self) -> int:
        api = self.stack.cluster.api
        assert api is not None
        return api.cut_watches(compact=True)

    async def sigterm_activator(self, index: int, load: Load) -> TidalProcess:
        """SIGTERM activator ``index``, then take it out of the load's rotation.

        In that order, as in a cluster: the pod gets SIGTERM and fails its
        readiness, and Services and load balancers drop it some time later,
        sending it requests meanwhile (here ``ENDPOINTS_DROP_S``, within the
        drain grace). Those requests must be served.
        """
        process = self.activators[index]
        process.signal(signal.SIGTERM)
        await asyncio.sleep(ENDPOINTS_DROP_S)
        await load.send(f"avoid {index}")
        return process

    async def restart_activator(self, index: int, load: Load) -> None:
        process = self.activators[index]
        assert process.proc is not None
        await asyncio.wait_for(process.proc.wait(), 30)
        await self.stack.restart(process)
        await load.send(f"use {index}")


@contextlib.asynccontextmanager
async def fault_stack(directory: Path, example: ExampleModel) -> AsyncIterator[FaultStack]:
    """The stack with two activators and ``example`` applied; everything stopped at the end."""
    settings = StackSettings(
        example=example,
        activator_args=ACTIVATOR_ARGS,
        scaler_args=("--tick-interval-s", "1"),
    )
    stack = SandboxStack(directory, settings)
    faults = FaultStack(stack, example)
    try:
        await stack.start()
        await stack.add_activator()
        yield faults
    finally:
        for load in faults.loads:
            await load.kill()
        await stack.stop()


def report(tally: Tally) -> str:
    """Print the table (for ``pytest -s``) and return it (for assertion messages)."""
    table = tally.table()
    print("\n" + table, flush=True)
    return table
