"""``tidal scaler``'s composition (scaler.service.serve) against the fake API over loopback.

Covers: the service reads a kubeconfig (namespace from its context), wins the
Lease in that namespace, watches the opted-in Deployment, accepts a report
with the token, refuses one without, and an activation scales the Deployment
from zero through /scale; shutting down releases the Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import aiohttp

from scaler.service import serve
from scaler.settings import load_settings
from tests.integration.scaler.fake_kube_api import FakeKubeApi, start
from tests.integration.scaler.support import eventually

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: u, user: {{token: abc}}}}]
contexts: [{{name: c, context: {{cluster: fake, user: u, namespace: tidal}}}}]
current-context: c
"""


async def test_service_end_to_end_on_fake_api(tmp_path: Path) -> None:
    fake = FakeKubeApi()
    fake.add_deployment("ml", "llama", replicas=0)
    gen = start(fake)
    url = await gen.__anext__()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=url))
    settings = load_settings(
        flags={
            "host": "127.0.0.1",
            "port": 0,
            "token": "tok",
            "identity": "scaler-0",
            "tick_interval_s": 0.1,
            "kube.kubeconfig": str(kubeconfig),
            "scrape.enabled": False,
        }
    )
    stop = asyncio.Event()
    port: list[int] = []
    task = asyncio.create_task(serve(settings, stop=stop, started=port.append))
    try:
        async with aiohttp.ClientSession() as http:
            await eventually(lambda: bool(port), "the server to listen")
            base = f"http://127.0.0.1:{port[0]}"

            async def leading_and_listed() -> bool:
                async with http.get(f"{base}/v1/targets") as resp:
                    body = await resp.json()
                return bool(body["leader"]) and [t["target"] for t in body["targets"]] == [
                    "ml/llama"
                ]

            await eventually(leading_and_listed, "leadership and the target")
            assert fake.leases["tidal/tidal-scaler"]["spec"]["holderIdentity"] == "scaler-0"
            report = {
                "activator": "a",
                "period_s": 1.0,
                "targets": {"ml/llama": {"concurrency": 1, "buffered": 1}},
            }
            async with http.post(f"{base}/v1/stats", json=report) as resp:
                assert resp.status == 401
            auth = {"Authorization": "Bearer tok"}
            async with http.post(f"{base}/v1/stats", json=report, headers=auth) as resp:
                assert resp.status == 200
                # The leader also lists the warm tier's not-routable endpoints (none here).
                assert await resp.json() == {"activators": 1, "leader": True, "sleeping": {}}
            async with http.post(
                f"{base}/v1/activate", json={"activator": "a", "target": "ml/llama"}, headers=auth
            ) as resp:
                assert resp.status == 202
            assert fake.deployments["ml/llama"]["spec"]["replicas"] == 1
            assert [e["reason"] for e in fake.events] == ["Activated"]
    finally:
        stop.set()
        await task
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()
    assert fake.leases["tidal/tidal-scaler"]["spec"]["holderIdentity"] == ""
