"""Launchers: start fake model server processes for the emulated kubelet.

Two implementations of :class:`~loadtests.sandbox.servers.spec.Launcher`:

- :class:`ZygoteLauncher` (the one to use): keeps one pre-imported zygote
  process (:mod:`loadtests.sandbox.servers.zygote`) and asks it to fork each
  server: a server is listening (with no startup delay) in tens of
  milliseconds and shares the interpreter's pages with its siblings;
- :class:`SubprocessLauncher`: a fresh interpreter per server (slower to
  start and heavier; kept as a fallback and as the reference in measurements).

Either way each server runs in its own session and process group, gets
SIGKILL if its parent dies (``PR_SET_PDEATHSIG``), and is killed by
:meth:`close`.

Main decision: the zygote's children are not this process's children, so
their exit statuses come from the zygote over its stdout; a reader task
resolves each :meth:`ServerProcess.wait`. Signals go straight to the child by
pid (SIGTERM to the server process, SIGKILL to its whole group) and are no
longer sent once the exit is known, so a reused pid is never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
from typing import Any

from loadtests.sandbox.servers.spec import ServerSpec

__all__ = ["SubprocessLauncher", "ZygoteLauncher", "server_argv"]


def server_argv(spec: ServerSpec) -> list[str]:
    """``tidal sandbox model-server`` flags for ``spec``."""
    return [
        "--engine", spec.engine,
        "--model", spec.model,
        "--host", spec.host,
        "--port", str(spec.port),
        "--startup-delay", repr(float(spec.startup_delay_s)),
        *spec.extra_args,
    ]  # fmt: skip


class _Process:
    """A server process whose exit is reported by someone else (the zygote)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._exit.result() if self._exit.done() else None

    def exited(self, status: int) -> None:
        """The zygote reported the process's exit status."""
        if not self._exit.done():
            self._exit.set_result(status)

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)

    def terminate(self) -> None:
        if not self._exit.done():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGTERM)

    def kill(self) -> None:
        if not self._exit.done():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)


class ZygoteLauncher:
    """Forks servers from a pre-imported zygote; see the module docstring."""

    def __init__(self, *, python: str = sys.executable, env: dict[str, str] | None = None) -> None:
        self._python = python
        self._env = env
        self._zygote: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._starting: dict[int, asyncio.Future[int]] = {}
        self._processes: dict[int, _Process] = {}
        self._early_exits: dict[int, int] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._closed = False

    async def ensure_zygote(self) -> asyncio.subprocess.Process:
        """The zygote, started first if it is not running (a first start then costs only
        the fork)."""
        async with self._lock:
            if self._closed:
                raise RuntimeError("the launcher is closed")
            if self._zygote is not None and self._zygote.returncode is None:
                return self._zygote
            zygote = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "loadtests.sandbox.servers.zygote",
                str(os.getpid()),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=self._env,
            )
            assert zygote.stdout is not None
            try:
                line = await asyncio.wait_for(zygote.stdout.readline(), timeout=60)
                if json.loads(line or b"{}").get("ready") is not True:
                    raise RuntimeError(f"the zygote did not start (said {line!r})")
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    zygote.kill()
                await zygote.wait()
                raise
            self._zygote = zygote
            self._reader = asyncio.create_task(self._read(zygote), name="zygote-reader")
            return zygote

    async def _read(self, zygote: asyncio.subprocess.Process) -> None:
        assert zygote.stdout is not None
        while True:
            line = await zygote.stdout.readline()
            if not line:
                break
            message: dict[str, Any] = json.loads(line)
            if "exit" in message:
                pid, status = int(message["exit"]), int(message["status"])
                process = self._processes.pop(pid, None)
                if process is None:
                    self._early_exits[pid] = status
                else:
                    process.exited(status)
            elif "id" in message:
                future = self._starting.pop(int(message["id"]), None)
                if future is not None and not future.done():
                    if "pid" in message:
                        future.set_result(int(message["pid"]))
                    else:
                        future.set_exception(OSError(message.get("error", "fork failed")))
        # The zygote is gone: its children got SIGKILL with it.
        for process in self._processes.values():
            process.exited(-signal.SIGKILL)
        self._processes.clear()
        for future in self._starting.values():
            if not future.done():
                future.set_exception(RuntimeError("the zygote exited"))
        self._starting.clear()

    async def start(self, spec: ServerSpec) -> _Process:
        zygote = await self.ensure_zygote()
        assert zygote.stdin is not None
        request_id = next(self._ids)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._starting[request_id] = future
        request = {
            "id": request_id,
            "argv": server_argv(spec),
            "env": dict(spec.env),
            "log_path": spec.log_path,
        }
        zygote.stdin.write(json.dumps(request).encode() + b"\n")
        await zygote.stdin.drain()
        pid = await future
        process = _Process(pid)
        if pid in self._early_exits:
            process.exited(self._early_exits.pop(pid))
        else:
            self._processes[pid] = process
        return process

    async def close(self) -> None:
        self._closed = True
        for process in list(self._processes.values()):
            process.kill()
        zygote = self._zygote
        if zygote is not None:
            if zygote.stdin is not None:
                zygote.stdin.close()  # the zygote kills what is left and exits
            try:
                await asyncio.wait_for(zygote.wait(), timeout=10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    zygote.kill()
                await zygote.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self._zygote = None


def _child_setup() -> None:  # runs in the child between fork and exec
    from loadtests.sandbox.servers.zygote import set_parent_death_signal

    set_parent_death_signal(signal.SIGKILL)


class _SubprocessServer:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    async def wait(self) -> int:
        return await self._process.wait()

    def terminate(self) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.terminate()

    def kill(self) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)


class SubprocessLauncher:
    """A fresh interpreter per server (reference and fallback)."""

    def __init__(self, *, python: str = sys.executable) -> None:
        self._python = python
        self._processes: list[_SubprocessServer] = []

    async def start(self, spec: ServerSpec) -> _SubprocessServer:
        env = {**os.environ, **spec.env}
        # Opening a log file is quick and local; no thread needed.
        log = open(spec.log_path, "ab") if spec.log_path else None  # noqa: SIM115, ASYNC230
        try:
            process = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "loadtests.sandbox.servers.cli",
                *server_argv(spec),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=_child_setup,
            )
        finally:
            if log is not None:
                log.close()
        server = _SubprocessServer(process)
        self._processes.append(server)
        return server

    async def close(self) -> None:
        for server in self._processes:
            server.kill()
        for server in self._processes:
            await server.wait()
        self._processes.clear()
