"""``tidal sandbox up`` as a subprocess, for the end-to-end tests of this folder.

The fixture starts it with short cold starts and windows, waits for the
lines it prints (kubeconfig, activator URL, ...), and always stops it:
SIGINT first, as a person at the terminal would, then SIGKILL if it hangs.
Its output goes to a file rather than a pipe, so nothing blocks if no one
reads it, and a failing test can show it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Short enough for a test, long enough to see: a 2 s cold start, and zero
# about ten seconds after the load stops.
FAST_KNOBS = (
    "--startup-delay=2s",
    "--window=6s",
    "--scale-down-delay=2s",
    "--grace-period=5s",
    "--target-concurrency=2",
    "--max-scale=3",
)
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 45.0


@dataclass
class SandboxUp:
    proc: subprocess.Popen[bytes]
    output: Path
    kubeconfig: Path
    activator_url: str
    activator_admin_url: str
    scaler_url: str

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def interrupt(self) -> int:
        """Ctrl-C, then wait: the exit status (SIGKILL and fail when it hangs)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"tidal sandbox up ignored SIGINT for {STOP_TIMEOUT_S:.0f}s")


def _field(text: str, name: str) -> str | None:
    match = re.search(rf"^\s+{re.escape(name)}:\s+(\S+)", text, re.MULTILINE)
    return match.group(1) if match else None


@pytest.fixture
def sandbox_up(tmp_path: Path) -> Iterator[SandboxUp]:
    with running_sandbox(tmp_path, FAST_KNOBS) as up:
        yield up


@contextlib.contextmanager
def running_sandbox(tmp_path: Path, knobs: tuple[str, ...]) -> Iterator[SandboxUp]:
    """``tidal sandbox up`` with ``knobs``, up until the block ends (stopped even on failure)."""
    output = tmp_path / "sandbox-up.out"
    with output.open("wb") as sink:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "scaler", "sandbox", "up"),
                *("--dir", str(tmp_path / "sandbox")),
                *knobs,
            ],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        text = ""
        while "Ctrl-C stops" not in text:
            text = output.read_text(errors="replace")
            if proc.poll() is not None:
                pytest.fail(f"tidal sandbox up exited with {proc.returncode}:\n{text}")
            if time.monotonic() > deadline:
                pytest.fail(f"tidal sandbox up was not up within {START_TIMEOUT_S:.0f}s:\n{text}")
            time.sleep(0.2)
        fields = {
            name: _field(text, name)
            for name in ("kubeconfig", "activator", "activator admin", "scaler")
        }
        missing = [name for name, value in fields.items() if value is None]
        assert not missing, f"tidal sandbox up did not print {missing}:\n{text}"
        yield SandboxUp(
            proc=proc,
            output=output,
            kubeconfig=Path(str(fields["kubeconfig"])),
            activator_url=str(fields["activator"]),
            activator_admin_url=str(fields["activator admin"]),
            scaler_url=str(fields["scaler"]),
        )
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
