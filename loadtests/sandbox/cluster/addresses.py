"""Loopback address blocks: each sandbox on the machine gets its own 127.X.0.0/16.

Linux routes all of 127.0.0.0/8 to the loopback interface, so every pod can
listen on its own address with the same port (8000), as pods do on a real
cluster network. Two sandboxes on one machine (two test sessions, a demo and
a test) must not hand out the same addresses, so a sandbox takes a block by
holding an exclusive ``flock`` on a lock file named after it, under
``$XDG_RUNTIME_DIR`` or the temporary directory (:mod:`lock_files`: the
kernel drops the lock when the holder dies, even by SIGKILL, so a crashed
sandbox never leaks its block; a clean stop removes the file).
127.0.0.0/16 is never taken: 127.0.0.1 belongs to everything else.

Inside a block: ``127.X.0.1`` is the API server's address, ``127.X.0.10``
onwards the nodes' (``hostIP``), and pods get ``127.X.1.1`` to
``127.X.255.254``. A released pod address goes to the back of the free list,
so an address is not reused while clients may still hold it.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from pathlib import Path

from loadtests.sandbox.cluster.lock_files import HeldLock, try_lock

__all__ = ["AddressBlock", "AddressesExhausted", "lock_dir"]


class AddressesExhausted(RuntimeError):
    """No free block on the machine, or no free pod address in a block."""


def lock_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base)


class AddressBlock:
    """One 127.X.0.0/16 held for the life of a sandbox; ``release()`` gives it back."""

    def __init__(self, second_octet: int, lock: HeldLock) -> None:
        self.octet = second_octet
        self._lock = lock
        self._next_pod = 0
        self._pod_space = 255 * 254  # 127.X.1.1 .. 127.X.255.254
        self._in_use: set[str] = set()
        self._released: deque[str] = deque()

    @classmethod
    def acquire(cls, *, directory: Path | None = None, first: int = 1) -> AddressBlock:
        """Take the first free block from ``127.<first>.0.0/16`` upwards."""
        where = directory or lock_dir()
        where.mkdir(parents=True, exist_ok=True)
        for octet in [*range(first, 255), *range(1, first)]:
            lock = try_lock(where / f"tidal-sandbox-127.{octet}.lock")
            if lock is not None:
                return cls(octet, lock)
        raise AddressesExhausted(
            f"every 127.X.0.0/16 block is held by another sandbox (lock files in {where})"
        )

    @property
    def cidr(self) -> str:
        return f"127.{self.octet}.0.0/16"

    @property
    def api_host(self) -> str:
        return f"127.{self.octet}.0.1"

    def node_address(self, index: int) -> str:
        if not 0 <= index < 240:
            raise AddressesExhausted(f"node index {index} is out of range 0..239")
        return f"127.{self.octet}.0.{10 + index}"

    def allocate_pod_ip(self) -> str:
        # Fresh addresses first; reuse released ones only once the space is used up.
        while self._next_pod < self._pod_space:
            n = self._next_pod
            self._next_pod += 1
            ip = f"127.{self.octet}.{1 + n // 254}.{1 + n % 254}"
            if ip not in self._in_use:
                self._in_use.add(ip)
                return ip
        if self._released:
            ip = self._released.popleft()
            self._in_use.add(ip)
            return ip
        raise AddressesExhausted(f"all {self._pod_space} pod addresses of {self.cidr} are in use")

    def release_pod_ip(self, ip: str) -> None:
        if ip in self._in_use:
            self._in_use.discard(ip)
            self._released.append(ip)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> AddressBlock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
