"""Lock files a sandbox holds while it runs, removed when it stops cleanly.

Two things on the machine are a sandbox's alone while it runs: its loopback
address block (:mod:`addresses`) and its directory (kubeconfig,
certificates, admin file, logs). Each is claimed with an exclusive ``flock``
on a lock file. The kernel drops the lock when the holder dies, even by
SIGKILL, so a crashed sandbox never keeps its claim; a file left behind by
a crash is simply locked again by the next sandbox.

Main decision: the holder removes its lock file on a clean stop, *while it
still holds the lock*, and a taker checks after locking that the path still
names the file it locked. Without that check, a taker that opened the file
just before the holder removed it would lock an orphan inode while a third
sandbox creates and locks a fresh file at the same path: two holders.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

__all__ = ["HeldLock", "holder_pid", "try_lock"]


class HeldLock:
    """An exclusive ``flock`` on ``path``; ``release()`` removes the file, then unlocks."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def try_lock(path: Path) -> HeldLock | None:
    """Lock ``path`` (created if missing) and write our pid in it; None when another holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return HeldLock(fd, path)
        # The holder removed it between our open and our lock: take the new file.
        os.close(fd)


def holder_pid(path: Path) -> int | None:
    """The pid written in a lock file, when it can be read."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
