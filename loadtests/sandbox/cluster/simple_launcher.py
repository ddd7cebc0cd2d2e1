"""A plain subprocess :class:`Launcher`: any command per pod, dying with its parent.

The servers package ships the fast launcher for fake model servers; this one
starts whatever command a factory builds from the :class:`ServerSpec`, which
is what the control plane's tests need (small scripted servers) and what the
sandbox falls back to when the fast launcher is not available.

Each process gets its own session (so its own process group: ``kill()``
signals the whole group, as a container runtime kills a container) and
``PR_SET_PDEATHSIG=SIGKILL``, so the kernel kills it the moment the process
that started it dies, even when that process is SIGKILLed and has no chance
to clean up. The death signal fires when the *thread* that forked the child
exits; asyncio forks from the event loop's thread, which lives as long as
the sandbox. A child that finds its parent already gone before the signal
was armed exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from loadtests.sandbox.servers.launcher import server_argv
from loadtests.sandbox.servers.spec import ServerSpec
from loadtests.sandbox.servers.zygote import set_parent_death_signal

__all__ = ["SimpleLauncher", "SimpleProcess", "die_with_parent", "model_server_command"]


def model_server_command(spec: ServerSpec) -> list[str]:
    """``tidal sandbox model-server`` for ``spec``, run by this interpreter."""
    return [sys.executable, "-m", "scaler", "sandbox", "model-server", *server_argv(spec)]


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` that arms PR_SET_PDEATHSIG=SIGKILL in the child."""

    def arm() -> None:
        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os._exit(137)

    return arm


class SimpleProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def wait(self) -> int:
        return await self._proc.wait()

    def terminate(self) -> None:
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        # The whole group, helpers included; the leader is its own group leader.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, signal.SIGKILL)


class SimpleLauncher:
    """Starts ``command(spec)`` per server; ``close()`` kills and reaps all of them."""

    def __init__(
        self,
        command: Callable[[ServerSpec], Sequence[str]] = model_server_command,
        *,
        log_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self._command = command
        self._log_dir = log_dir
        self._env = env
        self._procs: set[SimpleProcess] = set()

    async def start(self, spec: ServerSpec) -> SimpleProcess:
        env = {**(self._env if self._env is not None else os.environ), **spec.env}
        path: Path | None = None
        if spec.log_path is not None:
            path = Path(spec.log_path)
        elif self._log_dir is not None:
            name = f"{spec.env.get('POD_NAMESPACE', 'pod')}_{spec.env.get('POD_NAME', spec.host)}"
            path = self._log_dir / f"{name}.log"
        log_fd: int | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._command(spec),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_fd if log_fd is not None else asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.STDOUT
                if log_fd is not None
                else asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )
        finally:
            if log_fd is not None:
                os.close(log_fd)
        process = SimpleProcess(proc)
        self._procs = {p for p in self._procs if p.returncode is None}
        self._procs.add(process)
        return process

    async def close(self) -> None:
        procs, self._procs = list(self._procs), set()
        for proc in procs:
            proc.kill()
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
