"""Benchmark: one ``tidal scaler`` process sizing 1,000 Deployments at 2-second ticks.

A sandbox cluster (50 CPU nodes) and the real ``tidal scaler`` process
(defaults: 2 s ticks, pod scrapes on, 60 s windows). Two phases, same process:

1. **reference**: no opted-in Deployment; the idle scaler's CPU share of one
   core and its RSS over ``--measure-s`` seconds;
2. **load**: 1,000 opted-in Deployments at one replica each (process-less
   pods, ``engine: generic``, so nothing is scraped), and a synthetic
   activator posting ``/v1/stats`` every second with a concurrency for every
   one of them (varying between 4 and 12 per target, against a target of
   16, so each decision reads real, moving windows and keeps one replica).
   After a warm-up, the scaler's CPU share and RSS over the same time.

CPU share is (utime + stime) / wall time from ``/proc/<pid>/stat``; RSS is
``VmRSS``. The bench checks the decisions really ran: every target decided
within the last two ticks, and the reports were all accepted.

Targets (issue 6): under a quarter of one core, under 300 MB.

``python -m loadtests.bench.bench_scaler_scale [--deployments N] [--measure-s S]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from groundwork.rules.stats_report import ActivatorReport, TargetStats, report_json
from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.nodes import NodeSpec
from loadtests.sandbox.stack import TidalProcess

CPU_TARGET = 0.25
RSS_TARGET_MB = 300.0
NAMESPACE = "default"


def _deployment(i: int) -> dict[str, Any]:
    name = f"model-{i:04d}"
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {**labels, "autoscaling.tidal.dev/enabled": "true"},
            "annotations": {
                "autoscaling.tidal.dev/engine": "generic",
                "autoscaling.tidal.dev/min-scale": "1",
                "autoscaling.tidal.dev/target-concurrency": "16",
            },
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"sandbox.tidal.dev/process": "none"},
                },
                "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai"}]},
            },
        },
    }


def _cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _measure(pid: int, seconds: float) -> tuple[float, float]:
    """(CPU share of one core, peak RSS MB) of ``pid`` over ``seconds``."""
    cpu0, t0 = _cpu_s(pid), time.monotonic()
    peak = _rss_mb(pid)
    end = t0 + seconds
    while time.monotonic() < end:
        await asyncio.sleep(0.5)
        peak = max(peak, _rss_mb(pid))
    return (_cpu_s(pid) - cpu0) / (time.monotonic() - t0), peak


class SyntheticActivator:
    """Posts one report a second with a concurrency for every target."""

    def __init__(self, url: str, token: str, targets: list[str]) -> None:
        self.url = url
        self.token = token
        self.targets = targets
        self.statuses: dict[int, int] = {}
        self._rng = random.Random(7)

    def _body(self) -> dict[str, Any]:
        out = {}
        for key in self.targets:
            c = round(self._rng.uniform(4.0, 12.0), 3)
            out[key] = TargetStats(
                concurrency=c, in_flight=round(c), buffered=0, arrivals=round(c * 2)
            )
        return report_json(ActivatorReport(activator="bench-activator", period_s=1.0, targets=out))

    async def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            next_at = time.monotonic()
            while True:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.post(
                        f"{self.url}/v1/stats", json=self._body(), headers=headers
                    ) as resp:
                        await resp.read()
                        self.statuses[resp.status] = self.statuses.get(resp.status, 0) + 1
                next_at += 1.0
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))


async def _ready(cluster: SandboxCluster, count: int) -> int:
    items, _ = cluster.store.list(DEPLOYMENTS, namespace=NAMESPACE, copy=False)
    return sum(1 for d in items if (d.get("status", {}).get("readyReplicas") or 0) >= 1)


async def run_bench(deployments: int, measure_s: float) -> int:
    nodes = [NodeSpec(f"cpu-{i}", "on-demand", "us-east-1a", gpus=0, pods=120) for i in range(50)]
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        async with SandboxCluster(directory, nodes=nodes) as cluster:
            assert cluster.api is not None
            assert cluster.addresses is not None
            host = cluster.addresses.api_host.rsplit(".", 1)[0] + ".2"
            scaler_url = f"http://{host}:8090"
            env = {k: v for k, v in os.environ.items() if not k.startswith("TIDAL_")}
            env["PYTHONUNBUFFERED"] = "1"
            env["TIDAL_SCALER_TOKEN"] = token
            scaler = TidalProcess(
                "scaler",
                [
                    "scaler",
                    "--host",
                    host,
                    "--port",
                    "8090",
                    "--kubeconfig",
                    str(cluster.kubeconfig),
                    "--log-level",
                    "warning",
                ],
                env=env,
                log=directory / "tidal-scaler.log",
            )
            reporter_task: asyncio.Task[None] | None = None
            try:
                await scaler.start()
                assert scaler.proc is not None
                pid = scaler.proc.pid
                async with aiohttp.ClientSession() as session:
                    for _ in range(300):
                        with contextlib.suppress(aiohttp.ClientError):
                            async with session.get(f"{scaler_url}/readyz") as resp:
                                if resp.status == 200:
                                    break
                        await asyncio.sleep(0.1)
                await asyncio.sleep(2)  # imports and first sync done
                idle_cpu, idle_rss = await _measure(pid, measure_s)

                started = time.monotonic()
                for i in range(deployments):
                    obj = _deployment(i)
                    apply_defaults(obj, "Deployment", creating=True)
                    cluster.store.create(DEPLOYMENTS, obj)
                    if i % 50 == 0:
                        await asyncio.sleep(0)
                while await _ready(cluster, deployments) < deployments:
                    if time.monotonic() - started > 90:
                        print("the Deployments did not converge in 90 s", file=sys.stderr)
                        return 1
                    await asyncio.sleep(0.5)
                converge_s = time.monotonic() - started
                keys = [f"{NAMESPACE}/model-{i:04d}" for i in range(deployments)]
                reporter = SyntheticActivator(scaler_url, token, keys)
                reporter_task = asyncio.create_task(reporter.run())
                await asyncio.sleep(6)  # warm-up: the scaler's view and windows fill
                load_cpu, load_rss = await _measure(pid, measure_s)
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"{scaler_url}/v1/targets") as resp,
                ):
                    view = await resp.json()
                writes = sum(
                    1
                    for r in cluster.api.audit
                    if r.method == "PATCH" and r.path.endswith("/scale")
                )
            finally:
                if reporter_task is not None:
                    reporter_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reporter_task
                await scaler.stop(10)
    targets = view["targets"]
    latest = max((t["decided_at_s"] or 0.0) for t in targets)
    recent = sum(1 for t in targets if latest - (t["decided_at_s"] or 0.0) <= 4.0)
    print(
        f"deployments={deployments} (converged in {converge_s:.1f} s), reports/s=1 "
        f"with {deployments} targets each, ticks every 2 s, measured over {measure_s:.0f} s"
    )
    print(
        f"decisions: {recent}/{len(targets)} targets decided in the last two ticks; "
        f"reports {reporter.statuses}; scale writes {writes} (steady load: none expected)"
    )
    print(
        f"CPU: {load_cpu:.3f} of one core = {load_cpu / max(idle_cpu, 1e-3):.1f}x the idle "
        f"scaler with no targets ({idle_cpu:.3f}); target < {CPU_TARGET} -> "
        f"{'met' if load_cpu < CPU_TARGET else 'MISSED'}"
    )
    print(
        f"RSS: {load_rss:.0f} MB = {load_rss / idle_rss:.2f}x the idle scaler "
        f"({idle_rss:.0f} MB); target < {RSS_TARGET_MB:.0f} MB -> "
        f"{'met' if load_rss < RSS_TARGET_MB else 'MISSED'}"
    )
    ok = recent == len(targets) == deployments and reporter.statuses.get(200, 0) > 0
    if not ok:
        print("the decisions did not all run", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench_scaler_scale", description=__doc__)
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--measure-s", type=float, default=20.0)
    args = parser.parse_args(argv)
    return asyncio.run(run_bench(args.deployments, args.measure_s))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
