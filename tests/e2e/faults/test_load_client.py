"""The fault suite's instrument: the load client names each fate right.

Covers: against a scripted server on loopback (request ``n`` behaves by
``n``), the load client process records a full stream as ``completed``, an
OpenAI-shaped JSON error as ``error`` with its status and code, an error
without that body as ``bad_error``, a stream reset midway or one that ends
short of its tokens as ``cut``, a connection closed before any status as
``no_answer``, and a closed port as ``refused``; and ``avoid`` keeps requests
off an activator. If it misnamed a fate, the suite could pass while
requests go unanswered.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from tests.e2e.faults.fates import Record
from tests.e2e.faults.harness import REPO
from tests.integration.activator.helpers import free_port

pytestmark = [pytest.mark.e2e]

TOKENS = 3
# What the scripted server does with request n (sent to it when n is even).
BEHAVIOUR = ["complete", "json_error", "text_error", "reset_midway", "close_early", "short"]
EXPECTED = {
    "complete": ("completed", 200, ""),
    "json_error": ("error", 503, "buffer_full"),
    "text_error": ("bad_error", 500, ""),
    "reset_midway": ("cut", 200, ""),
    "close_early": ("no_answer", 0, ""),
    "short": ("cut", 200, ""),
}


async def scripted(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    number = int(re.sub(r"\D", "", body["prompt"]))
    behaviour = BEHAVIOUR[(number // 2) % len(BEHAVIOUR)]
    if behaviour == "json_error":
        error = {"message": "full", "type": "overloaded_error", "code": "buffer_full"}
        return web.json_response({"error": error}, status=503)
    if behaviour == "text_error":
        return web.Response(status=500, text="oops")
    if behaviour == "close_early":
        assert request.transport is not None
        request.transport.close()
        return web.Response()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    tokens = TOKENS - 1 if behaviour == "short" else TOKENS
    for i in range(tokens):
        await resp.write(f"data: {json.dumps({'i': i})}\n\n".encode())
        if behaviour == "reset_midway":
            await asyncio.sleep(0.05)
            assert request.transport is not None
            request.transport.abort()
            return resp
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/completions", scripted)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def run_client(urls: list[str], commands: list[str]) -> list[Record]:
    config = {"urls": urls, "model": "m", "max_tokens": TOKENS, "timeout_s": 10}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.e2e.faults.load_client", json.dumps(config),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 30)).strip() == b"started"
        for command in commands:
            proc.stdin.write(command.encode() + b"\n")
            await proc.stdin.drain()
            await asyncio.sleep(0.3)
        proc.stdin.write(b"stop\n")
        out = await asyncio.wait_for(proc.stdout.read(), 30)
        assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return [Record.from_json(r) for r in json.loads(out.decode().splitlines()[-1])["records"]]


async def test_each_fate_is_named(server: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    records = await run_client([server, closed], [f"burst {2 * len(BEHAVIOUR)}"])
    assert len(records) == 2 * len(BEHAVIOUR)
    for record in records:
        if record.index % 2:
            assert (record.activator, record.fate) == (1, "refused"), record
            continue
        behaviour = BEHAVIOUR[(record.index // 2) % len(BEHAVIOUR)]
        assert (record.fate, record.status, record.code) == EXPECTED[behaviour], record


async def test_avoid_keeps_requests_off_an_activator(server: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    records = await run_client([server, closed], ["avoid 1", "burst 4", "use 1", "burst 2"])
    assert [r.activator for r in records] == [0, 0, 0, 0, 1, 0]


def test_load_goes_to_loopback_only() -> None:
    from tests.e2e.faults.load_client import Config

    with pytest.raises(ValueError, match="loopback"):
        Config.parse(json.dumps({"urls": ["http://10.0.0.1:80"], "model": "m"}))
