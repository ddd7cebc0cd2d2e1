"""Fixtures for the load-test integration tests: loopback servers and a locust runner.

Locust always runs as a subprocess (importing it patches this process with
gevent). :func:`run_locust` starts it in its own session, and kills the whole
group if it overruns or the test fails, so no locust outlives its test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pytest
from aiohttp import web

PROJECT_ROOT = Path(__file__).resolve().parents[3]
LOCUSTFILE = PROJECT_ROOT / "loadtests" / "locustfile.py"


@dataclass(frozen=True)
class LocustRun:
    returncode: int
    output: str


async def run_locust(
    host: str, args: list[str], *, csv_prefix: Path, timeout_s: float = 90.0
) -> LocustRun:
    """Run a headless locust against ``host``; its combined output is kept beside the CSVs."""
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", host,
        "--csv", str(csv_prefix), "--csv-full-history", "--only-summary", *args,
    ]  # fmt: skip
    log_path = Path(f"{csv_prefix}_locust.log")
    with _open_log(log_path) as log:
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=PROJECT_ROOT,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            returncode = await asyncio.wait_for(process.wait(), timeout=timeout_s)
        except TimeoutError:
            pytest.fail(f"locust ran past {timeout_s} s:\n{_read(log_path)[-3000:]}")
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
    return LocustRun(returncode, _read(log_path))


# Small synchronous file helpers: the files are local and tiny.
def _open_log(path: Path) -> BinaryIO:
    return path.open("wb")


def _read(path: Path) -> str:
    return path.read_text()


ServeApp = Callable[[web.Application], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[ServeApp]:
    """``url = await serve(app)``: run an aiohttp app on 127.0.0.1, port 0, for the test."""
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> str:
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    try:
        yield start
    finally:
        for runner in reversed(runners):
            await runner.cleanup()
