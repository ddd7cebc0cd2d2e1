"""``tidal status`` against the fake API (and a fake scaler for live values).

Covers: the table lists only opted-in Deployments with desired, ready,
on-demand/spot, mode and reason from the status annotation; ``-o json``;
live values from ``--scaler-url``; a Deployment without a status yet shows
dashes; an unreachable API server is a clear error with exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from scaler import status
from tests.integration.scaler.fake_kube_api import FakeKubeApi, start
from tests.integration.scaler.test_service import KUBECONFIG

STATUS = {
    "desired": 3,
    "mode": "panic",
    "onDemand": 3,
    "spot": 0,
    "reason": "ScaledUp",
    "lastChangeTime": "2026-01-01T00:00:00Z",
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    status.configure(parser)
    return parser.parse_args(argv)


async def run_status(argv: list[str]) -> int:
    # status.run() owns its event loop; run it in a thread from this async test.
    return await asyncio.to_thread(status.run, parse(argv))


async def test_status_table_json_and_live(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeKubeApi()
    fake.add_deployment(
        "ml", "llama", replicas=3, annotations={"autoscaling.tidal.dev/status": json.dumps(STATUS)}
    )
    fake.add_deployment("ml", "fresh", replicas=0)
    fake.add_deployment("ml", "unmanaged", replicas=1, labels={"app": "x"})
    gen = start(fake)
    url = await gen.__anext__()

    async def targets(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "targets": [
                    {
                        "target": "ml/llama",
                        "desired": 4,
                        "mode": "panic",
                        "reason": "ScaledUp",
                        "signals": {"concurrency": {"stable": 40.5, "panic": 60.0, "fresh": True}},
                        "observed": {"activator_concurrency": 61.0},
                    }
                ]
            }
        )

    app = web.Application()
    app.router.add_get("/v1/targets", targets)
    scaler = TestServer(app, host="127.0.0.1", port=0)
    await scaler.start_server()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=url))
    try:
        assert await run_status(["--kubeconfig", str(kubeconfig)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split() == ["NAMESPACE", "NAME", "DESIRED", "READY", "MODE", "REASON"]
        assert lines[1].split() == ["ml", "fresh", "-", "0", "-", "-"]
        assert lines[2].split() == ["ml", "llama", "3", "3", "panic", "ScaledUp"]
        assert len(lines) == 3
        # -o wide adds the split by capacity type (every column there is).
        assert await run_status(["--kubeconfig", str(kubeconfig), "-o", "wide"]) == 0
        wide = capsys.readouterr().out.splitlines()
        assert wide[0].split()[:8] == [
            "NAMESPACE",
            "NAME",
            "DESIRED",
            "READY",
            "ON-DEMAND",
            "SPOT",
            "MODE",
            "REASON",
        ]
        assert wide[2].split()[:8] == ["ml", "llama", "3", "3", "3", "0", "panic", "ScaledUp"]
        assert (
            await run_status(
                [
                    "--kubeconfig",
                    str(kubeconfig),
                    "-o",
                    "json",
                    "--scaler-url",
                    f"http://127.0.0.1:{scaler.port}",
                ]
            )
            == 0
        )
        rows = json.loads(capsys.readouterr().out)
        llama = next(r for r in rows if r["name"] == "llama")
        assert llama["live"]["desired"] == 4
        assert llama["live"]["signals"]["concurrency"]["stable"] == 40.5
        assert (
            await run_status(
                ["--kubeconfig", str(kubeconfig), "--scaler-url", f"http://127.0.0.1:{scaler.port}"]
            )
            == 0
        )
        table = capsys.readouterr().out.splitlines()
        assert "CONCURRENCY" in table[0]
        assert "40.50" in table[2]
        fake.unavailable = True
    finally:
        await scaler.close()
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()
    assert await run_status(["--kubeconfig", str(kubeconfig), "--timeout-s", "2"]) == 1
    assert "tidal status:" in capsys.readouterr().err
