"""``tidal sandbox cluster`` as a child process, for the end-to-end tests that drive it.

:func:`sandbox_cluster` starts it in a private directory with the flags a
test asks for, waits until it has written ``admin.json`` (the API server is
up and the kubeconfig written), and always stops it: SIGTERM first, as a
service manager would, then SIGKILL if it hangs. A test may kill it itself
(the process is handed over with the directory).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RunningCluster:
    proc: subprocess.Popen[bytes]
    directory: Path

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"


@pytest.fixture
def sandbox_cluster(tmp_path: Path) -> Iterator[Callable[..., RunningCluster]]:
    """``sandbox_cluster("--rbac")``: a started cluster; every one is stopped at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*flags: str) -> RunningCluster:
        directory = tmp_path / f"sandbox-{len(started)}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "scaler", "sandbox", "cluster", "--dir", str(directory),
             *flags],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        started.append(proc)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (directory / "admin.json").exists():
            assert proc.poll() is None, f"the sandbox exited early with {proc.returncode}"
            assert time.monotonic() < deadline, f"the sandbox did not start in {START_TIMEOUT_S} s"
            time.sleep(0.1)
        return RunningCluster(proc, directory)

    try:
        yield start
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
