"""``tidal status`` where a first-time user tripped (issue 15).

Covers:
- ``--scaler-url`` without a scheme is refused at once with the form to use
  (and a guess), not a cryptic client error;
- an unreachable scaler costs only the live columns: the table from the API
  is printed, the error goes to stderr, the exit status is 1;
- with live values the table shows both reasons, REASON (the last change,
  from the status annotation) and LIVE-REASON (the scaler now), and says
  under itself which is which.
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

STATUS = {"desired": 2, "mode": "stable", "reason": "ScaledUp", "onDemand": 2, "spot": 0}


# The parsing tests are async only so that pytest-asyncio treats every test of
# this module alike: a sync test between async ones leaves it an event loop
# that the next one reports as unclosed.
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tidal status")
    status.configure(p)
    return p


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("127.1.0.2:8090", "did you mean http://127.1.0.2:8090?"),
        ("localhost", "did you mean http://localhost?"),
        ("ftp://127.0.0.1:8090", "use http://HOST:PORT"),
        ("http://", "use http://HOST:PORT"),
    ],
)
async def test_scaler_url_without_a_scheme_says_what_to_write(
    value: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["--scaler-url", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--scaler-url" in err
    assert hint in err


async def test_a_proper_scaler_url_is_kept() -> None:
    args = parser().parse_args(["--scaler-url", "https://scaler.example:8090/"])
    assert args.scaler_url == "https://scaler.example:8090/"


@contextlib.asynccontextmanager
async def kube(tmp_path: Path):  # type: ignore[no-untyped-def]
    fake = FakeKubeApi()
    fake.add_deployment(
        "ml", "llama", replicas=2, annotations={"autoscaling.tidal.dev/status": json.dumps(STATUS)}
    )
    gen = start(fake)
    url = await gen.__anext__()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=url))
    try:
        yield kubeconfig
    finally:
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()


async def run(argv: list[str]) -> int:
    return await asyncio.to_thread(status.run, parser().parse_args(argv))


async def test_unreachable_scaler_still_shows_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with kube(tmp_path) as kubeconfig:
        code = await run(
            [
                "--kubeconfig",
                str(kubeconfig),
                "--scaler-url",
                "http://127.0.0.1:9",
                "--timeout-s",
                "2",
            ]
        )
    out, err = capsys.readouterr()
    assert code == 1
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert "LIVE-DESIRED" not in lines[0]
    assert lines[1].split() == ["ml", "llama", "2", "2", "stable", "ScaledUp"]
    assert "no live values" in err
    assert "http://127.0.0.1:9" in err


async def test_both_reasons_are_shown_and_told_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def targets(request: web.Request) -> web.Response:
        view = {"target": "ml/llama", "desired": 2, "mode": "stable", "reason": "ScaleDownDelay"}
        return web.json_response({"targets": [view]})

    app = web.Application()
    app.router.add_get("/v1/targets", targets)
    scaler = TestServer(app, host="127.0.0.1", port=0)
    await scaler.start_server()
    try:
        async with kube(tmp_path) as kubeconfig:
            code = await run(
                ["--kubeconfig", str(kubeconfig), "--scaler-url", f"http://127.0.0.1:{scaler.port}"]
            )
    finally:
        await scaler.close()
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    row = dict(zip(header, lines[1].split(), strict=False))
    assert row["REASON"] == "ScaledUp"
    assert row["LIVE-REASON"] == "ScaleDownDelay"
    assert any("REASON: why the scale last changed" in line for line in lines)
    assert any("LIVE-REASON: what the scaler says now" in line for line in lines)
