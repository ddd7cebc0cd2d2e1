"""The zygote: a pre-imported parent that forks one fake model server per request.

Starting a Python interpreter and importing aiohttp, prometheus_client and
uvloop takes a few hundred milliseconds of CPU; a sandbox that starts dozens
of pods on two cores would stall. The zygote pays that once: it imports
everything a server needs, then forks a child per server (a few
milliseconds), and the children share the imported pages copy-on-write.

Protocol with :class:`~loadtests.sandbox.servers.launcher.ZygoteLauncher`,
one JSON object per line:

- stdin: ``{"id": N, "argv": [...], "env": {...}, "log_path": str|null}``;
- stdout: ``{"ready": true}`` once, ``{"id": N, "pid": P}`` per child
  started (or ``{"id": N, "error": "..."}``), ``{"exit": P, "status": S}``
  when a child exits (S as ``Popen.returncode``: negative for a signal).

Lifetime: the zygote gets SIGKILL when the launcher's process dies
(``PR_SET_PDEATHSIG``), and each child gets SIGKILL when the zygote dies, so
nothing outlives a sandbox that is killed outright. Each child runs in its
own session and process group (``os.setsid``), so it can be signalled as a
group. When stdin closes, the zygote kills every child and exits.

Main decision: the zygote is single-threaded and runs no event loop (forking
from a process with threads or a running loop is unsafe); it waits on stdin
and on SIGCHLD through a ``selectors`` loop and ``signal.set_wakeup_fd``.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import selectors
import signal
import sys
import traceback
from typing import Any

PR_SET_PDEATHSIG = 1


def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")


def _preimport() -> None:
    # Everything a server imports, so that children start with it in memory.
    import aiohttp.web  # noqa: F401
    import prometheus_client  # noqa: F401
    import uvloop  # noqa: F401

    import loadtests.sandbox.servers.cli
    import loadtests.sandbox.servers.triton
    import loadtests.sandbox.servers.vllm  # noqa: F401


def _send(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _child(zygote_pid: int, request: dict[str, Any], protocol_fds: list[int]) -> None:
    """Runs in the forked child; never returns."""
    code = 1
    try:
        os.setsid()
        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != zygote_pid:  # the zygote died between fork and prctl
            os._exit(1)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        log_path = request.get("log_path")
        if log_path:
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
        else:
            os.dup2(2, 1)  # stdout is the protocol pipe: send output to stderr instead
        for fd in protocol_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        sys.stdin = open(0)  # noqa: SIM115 - the child's own stdin, for its lifetime
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.environ.update(request.get("env") or {})
        gc.unfreeze()
        from loadtests.sandbox.servers.cli import main

        code = main(list(request["argv"]))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(launcher_pid: int) -> int:
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != launcher_pid:
        return 1  # the launcher is already gone
    _preimport()
    gc.collect()
    gc.freeze()  # keep the imported objects' pages shared with the children
    me = os.getpid()
    out = sys.stdout
    children: set[int] = set()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # The launcher decides when children stop; a Ctrl-C in the terminal must not kill us first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stdin_fd = sys.stdin.fileno()
    sel = selectors.DefaultSelector()
    sel.register(stdin_fd, selectors.EVENT_READ, "stdin")
    sel.register(wake_r, selectors.EVENT_READ, "signal")
    _send(out, {"ready": True})
    buffer = b""
    # stdin and stdout (0, 1) are replaced in the child; these must not leak into it.
    protocol_fds = [wake_r, wake_w]

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            _send(out, {"exit": pid, "status": os.waitstatus_to_exitcode(status)})

    try:
        while True:
            for key, _ in sel.select():
                if key.data == "signal":
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    reap()
                    continue
                data = os.read(stdin_fd, 65536)
                if not data:
                    return 0
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    request = json.loads(line)
                    try:
                        pid = os.fork()
                    except OSError as e:
                        _send(out, {"id": request["id"], "error": str(e)})
                        continue
                    if pid == 0:
                        _child(me, request, protocol_fds)
                    children.add(pid)
                    _send(out, {"id": request["id"], "pid": pid})
            reap()
    finally:
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in list(children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
