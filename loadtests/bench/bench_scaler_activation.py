"""Benchmark: from a request at the activator to the scale patch, from zero.

The sandbox stack (emulated cluster, ``tidal activator`` and ``tidal scaler``
as real processes) with one fake-vLLM model at zero replicas. Each round, one
request is sent to the activator; the activator holds it and posts
``/v1/activate``; the scaler decides at once and patches ``/scale``. The
patch is observed in the API server's audit log (recorded when the write is
stored, on the same event-loop clock as the send), so the figure is:

    activation latency = patch stored - request sent

(the request's own trip to the activator is included). Between rounds the
scaler takes the model back to zero by itself (grace period 0 s) and the
bench waits for no pod to be left.

Reference, same run: a bare API round trip (``GET .../deployments/<name>/scale``
over TLS with a bearer token, as the scaler's client does); the scaler's path
is one ``/v1/activate`` trip plus a read and a patch of ``/scale``, so about
three round trips is the floor.

Target (docs/architecture.md, "The scaler"): under 50 ms.

``python -m loadtests.bench.bench_scaler_activation [--rounds N]``
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import aiohttp

from loadtests.sandbox.cluster.apiserver.server import AuditRecord
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.stack import SandboxStack, StackSettings

TARGET_S = 0.050


def _model() -> ExampleModel:
    return ExampleModel(
        startup_delay_s=0.3,
        max_scale=1,
        window_s=6.0,
        scale_down_delay_s=0.0,
        grace_s=0.0,
        cold_start_timeout_s=60.0,
    )


async def _api_round_trips(base_url: str, ca_path: Path, token: str, count: int) -> list[float]:
    """``count`` reads of a Deployment's ``/scale`` straight from the API server, timed."""
    context = ssl.create_default_context(cafile=str(ca_path))
    url = f"{base_url}/apis/apps/v1/namespaces/default/deployments/llama/scale"
    headers = {"Authorization": f"Bearer {token}"}
    took = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        for _ in range(count + 5):
            started = time.perf_counter()
            async with session.get(url, headers=headers) as resp:
                await resp.read()
                assert resp.status == 200
            took.append(time.perf_counter() - started)
    return took[5:]  # the first ones open the connection


def _scale_patches(audit: Iterable[AuditRecord], since: float) -> list[float]:
    """When the scalers patched ``llama``'s scale since ``since`` (the API server's clock)."""
    return [
        r.at
        for r in audit
        if r.at >= since
        and r.user.startswith("tidal-scaler")
        and r.method == "PATCH"
        and r.path.endswith("/deployments/llama/scale")
    ]


async def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError(f"not within {timeout_s}s: {what}")
        await asyncio.sleep(0.05)


async def run_bench(rounds: int) -> int:
    example = _model()
    with tempfile.TemporaryDirectory() as tmp:
        stack = SandboxStack(Path(tmp), StackSettings(example=example))
        try:
            await stack.start()
            api = stack.cluster.api
            assert api is not None
            loop = asyncio.get_running_loop()
            reference = await _api_round_trips(api.url, api.ca_path, api.admin_token, 50)
            url = f"{stack.addresses.activator_url}/v1/completions"
            body = {"model": example.model, "prompt": "hi", "max_tokens": 4}
            latencies: list[float] = []
            timeout = aiohttp.ClientTimeout(total=60)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                # The activator must know the target before the first round (404 until then).
                for _ in range(200):
                    async with session.get(f"{stack.addresses.activator_url}/v1/models") as resp:
                        await resp.read()
                    if stack.deployment_state(example.name) == (0, 0, 0):
                        break
                    await asyncio.sleep(0.05)
                for i in range(rounds):
                    await _wait(
                        lambda: stack.deployment_state(example.name) == (0, 0, 0),
                        30,
                        "the model back at zero",
                    )
                    await asyncio.sleep(1.5)  # the activator's view of endpoints settles
                    sent = loop.time()
                    async with session.post(url, json=body) as resp:
                        await resp.read()
                        status = resp.status
                    patches = _scale_patches(api.audit, sent)
                    if status == 404 and not patches:
                        await asyncio.sleep(0.5)  # routing not learnt yet: not a round
                        continue
                    if status != 200 or not patches:
                        print(f"round {i}: status {status}, patches {patches}", file=sys.stderr)
                        return 1
                    latencies.append(patches[0] - sent)
        finally:
            await stack.stop()
    if not latencies:
        print("no round completed", file=sys.stderr)
        return 1
    ref = statistics.median(reference)
    p50 = statistics.median(latencies)
    worst = max(latencies)
    print(f"rounds={len(latencies)} (request at the activator -> /scale patch stored, from zero)")
    print(
        f"activation latency: p50 {p50 * 1e3:.1f} ms, max {worst * 1e3:.1f} ms "
        f"= {p50 / ref:.1f}x (max {worst / ref:.1f}x) a bare API round trip "
        f"({ref * 1e3:.2f} ms, p50 of {len(reference)})"
    )
    print(
        f"target: under {TARGET_S * 1e3:.0f} ms -> "
        f"{'met' if p50 < TARGET_S else 'MISSED'} at p50, "
        f"{'met' if worst < TARGET_S else 'missed'} at max"
    )
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench_scaler_activation", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    return asyncio.run(run_bench(args.rounds))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
