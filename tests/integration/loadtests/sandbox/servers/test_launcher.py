"""Launching fake servers as processes (the emulated kubelet's path).

Covers:
- the zygote launcher starts a server in its own process group that writes
  its log where asked and takes the extra flags;
- SIGTERM to a busy server process finishes every running request, then the
  process exits 0 (and refuses new connections meanwhile);
- kill() kills the process group; close() kills whatever is left;
- the crash fault makes the process exit with its crash status;
- when the launcher's process is SIGKILLed, the zygote and every server die too;
- the subprocess launcher works the same way (reference for measurements);
- ``tidal sandbox model-server`` exists and rejects bad flags.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from loadtests.sandbox.servers.launcher import SubprocessLauncher, ZygoteLauncher
from loadtests.sandbox.servers.server import free_port
from loadtests.sandbox.servers.spec import ServerSpec


@pytest.fixture
async def launcher() -> AsyncIterator[ZygoteLauncher]:
    launcher = ZygoteLauncher()
    try:
        yield launcher
    finally:
        await launcher.close()


async def wait_listening(port: int, path: str = "/health", timeout_s: float = 10) -> float:
    started = time.monotonic()
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}{path}") as resp:
                    if resp.status == 200:
                        return time.monotonic() - started
            except aiohttp.ClientError:
                pass
            assert time.monotonic() - started < timeout_s, f"nothing listening on {port}"
            await asyncio.sleep(0.005)


def spec(port: int, *extra: str, **kwargs: object) -> ServerSpec:
    return ServerSpec(
        engine="vllm", model="m", host="127.0.0.1", port=port, extra_args=extra, **kwargs
    )  # type: ignore[arg-type]


async def test_zygote_starts_a_server_with_its_log(
    launcher: ZygoteLauncher, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    process = await launcher.start(
        spec(port, "--max-num-seqs", "7", env={"TIDAL_TEST_MARK": "yes"}, log_path=str(log))
    )
    await wait_listening(port)
    assert os.getpgid(process.pid) == process.pid  # its own process group
    process.terminate()
    assert await process.wait() == 0
    text = log.read_text()
    assert f"ready on 127.0.0.1:{port}" in text
    assert "max_num_seqs=7" in text


async def test_sigterm_finishes_running_requests(launcher: ZygoteLauncher) -> None:
    port = free_port()
    process = await launcher.start(spec(port, "--speedup", "5", "--max-num-seqs", "2"))
    await wait_listening(port)
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:

        async def generate() -> bytes:
            body = {"prompt": "x", "max_tokens": 100, "ignore_eos": True, "stream": True}
            async with session.post(f"{url}/v1/completions", json=body) as resp:
                return await resp.read()

        tasks = [asyncio.create_task(generate()) for _ in range(4)]  # two run, two wait
        await asyncio.sleep(0.1)
        process.terminate()
        bodies = await asyncio.gather(*tasks)
    assert await process.wait() == 0
    for body in bodies:
        assert body.endswith(b"data: [DONE]\n\n")
        assert body.count(b'"text":') == 100


async def test_kill_and_close(launcher: ZygoteLauncher) -> None:
    ports = [free_port(), free_port()]
    first = await launcher.start(spec(ports[0]))
    second = await launcher.start(spec(ports[1]))
    await wait_listening(ports[0])
    first.kill()
    assert await first.wait() == -signal.SIGKILL
    await launcher.close()
    assert await second.wait() == -signal.SIGKILL


async def test_crash_fault_exits_with_its_status(launcher: ZygoteLauncher) -> None:
    port = free_port()
    process = await launcher.start(spec(port, "--crash-after", "100ms"))
    assert await asyncio.wait_for(process.wait(), timeout=10) == 70


async def test_startup_failure_exits_nonzero(launcher: ZygoteLauncher) -> None:
    port = free_port()
    first = await launcher.start(spec(port))
    await wait_listening(port)
    second = await launcher.start(spec(port))  # the port is taken
    assert await asyncio.wait_for(second.wait(), timeout=10) == 1
    first.terminate()
    assert await first.wait() == 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_servers_die_with_a_killed_sandbox() -> None:
    port = free_port()
    script = textwrap.dedent(
        f"""
        import asyncio, json, sys
        from loadtests.sandbox.servers.launcher import ZygoteLauncher
        from loadtests.sandbox.servers.spec import ServerSpec

        async def main():
            launcher = ZygoteLauncher()
            p = await launcher.start(ServerSpec(engine="vllm", model="m", host="127.0.0.1",
                                                port={port}))
            print(json.dumps({{"server": p.pid, "zygote": launcher._zygote.pid}}), flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    )
    sandbox = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert sandbox.stdout is not None
        pids = json.loads(sandbox.stdout.readline())
        assert _alive(pids["server"])
        assert _alive(pids["zygote"])
        sandbox.kill()  # SIGKILL: no cleanup code runs
        sandbox.wait()
        deadline = time.monotonic() + 5
        while (_alive(pids["server"]) or _alive(pids["zygote"])) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(pids["server"])
        assert not _alive(pids["zygote"])
    finally:
        sandbox.kill()
        sandbox.wait()
        if sandbox.stdout is not None:
            sandbox.stdout.close()


async def test_subprocess_launcher() -> None:
    launcher = SubprocessLauncher()
    try:
        port = free_port()
        process = await launcher.start(spec(port))
        await wait_listening(port)
        process.terminate()
        assert await process.wait() == 0
    finally:
        await launcher.close()


def test_cli_subcommand_exists_and_rejects_bad_flags() -> None:
    tidal = [sys.executable, "-m", "scaler.cli"]
    shown = subprocess.run(
        [*tidal, "sandbox", "model-server", "--help"], capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0
    assert "--startup-delay" in shown.stdout
    bad = subprocess.run(
        [*tidal, "sandbox", "model-server", "--startup-delay", "soon"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert "not a duration" in bad.stderr
    wrong = subprocess.run(
        [*tidal, "sandbox", "model-server", "--fail-rate", "2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode == 2
    assert "fail_rate" in wrong.stderr
