"""``tidal sandbox up`` as a user meets it: kubectl, the printed commands, Ctrl-C.

Covers: the printed kubeconfig works with kubectl, which sees the example
Deployment opted in at zero replicas; the printed curl command, run as
printed, streams a chat completion through the activator, held through the
cold start; the Deployment then reports a ready replica, and the printed
``tidal status`` command shows it, and the README's ``kubectl logs`` line
shows the model server's output; a second ``tidal sandbox up`` in the same
directory is refused and leaves the first's kubeconfig alone; Ctrl-C
(SIGINT) stops everything and exits 0, leaving no process and no lock file
behind (checked here and by the suite's leak check).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadtests.sandbox.cluster.addresses import lock_dir
from loadtests.sandbox.cluster.lock_files import holder_pid
from tests.conftest import descendants
from tests.e2e.loadtests.conftest import SandboxUp

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

README = Path(__file__).resolve().parents[4] / "README.md"


def printed_command(up: SandboxUp, containing: str) -> str:
    """A command from the 'Try' list, exactly as printed."""
    found = [line.strip() for line in up.text().splitlines() if containing in line]
    found = [line for line in found if not line.startswith("#")]
    assert found, f"no printed command containing {containing!r}:\n{up.text()}"
    return found[0]


def shell(command: str, *, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=timeout_s
    )


def deployment(up: SandboxUp, kubectl: str) -> dict[str, Any]:
    out = subprocess.run(
        [kubectl, "get", "deploy", "llama", "-o", "json"],
        env=up.env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    got: dict[str, Any] = json.loads(out.stdout)
    return got


def test_kubectl_curl_status_and_ctrl_c(
    sandbox_up: SandboxUp, tool_path: Callable[[str], str]
) -> None:
    kubectl = tool_path("kubectl")
    tool_path("curl")
    before = deployment(sandbox_up, kubectl)
    assert before["spec"]["replicas"] == 0
    assert before["metadata"]["labels"]["autoscaling.tidal.dev/enabled"] == "true"
    table = subprocess.run(
        [kubectl, "get", "deploy"], env=sandbox_up.env(), capture_output=True, text=True, timeout=30
    )
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[1].split()[:2] == ["llama", "0/0"], table.stdout

    directory = sandbox_up.kubeconfig.parent
    kubeconfig = sandbox_up.kubeconfig.read_bytes()
    second = subprocess.run(
        [sys.executable, "-m", "scaler", "sandbox", "up", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1, second.stdout + second.stderr
    assert f"a sandbox is already running in {directory}" in second.stderr, second.stderr
    assert "Traceback" not in second.stderr
    assert sandbox_up.kubeconfig.read_bytes() == kubeconfig

    # A streaming request, with the curl line as printed, held through the cold start.
    started = time.monotonic()
    answer = shell(printed_command(sandbox_up, "curl -N "), timeout_s=60)
    took_s = time.monotonic() - started
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.rstrip().endswith("data: [DONE]"), answer.stdout[-500:]
    assert '"content":' in answer.stdout
    assert took_s >= 2.0, f"answered in {took_s:.2f}s, before a 2 s cold start could end"

    # readyReplicas follows the pod's Ready condition, a moment after the activator saw it.
    deadline = time.monotonic() + 20
    while deployment(sandbox_up, kubectl).get("status", {}).get("readyReplicas", 0) < 1:
        assert time.monotonic() < deadline, "the Deployment never reported a ready replica"
        time.sleep(0.25)
    (logs_line,) = [
        line for line in README.read_text().splitlines() if line.startswith("kubectl logs ")
    ]
    logs = shell(f"KUBECONFIG={sandbox_up.kubeconfig} {logs_line}", timeout_s=30)
    assert logs.returncode == 0, logs.stderr
    assert "fake vllm 'llama-3-8b' ready on" in logs.stdout, logs.stdout
    status = shell(printed_command(sandbox_up, " status --scaler-url "), timeout_s=30)
    assert status.returncode == 0, status.stderr
    (row,) = [line.split() for line in status.stdout.splitlines() if line.startswith("default")]
    assert row[1] == "llama" and int(row[3]) >= 1, status.stdout  # NAMESPACE NAME DESIRED READY

    octet = sandbox_up.activator_url.split("//")[1].split(".")[1]
    locks = [directory / "sandbox.lock", lock_dir() / f"tidal-sandbox-127.{octet}.lock"]
    assert [holder_pid(path) for path in locks] == [sandbox_up.proc.pid] * 2
    assert sandbox_up.interrupt() == 0, sandbox_up.text()
    assert sandbox_up.text().rstrip().endswith("Stopped.")
    assert not descendants(os.getpid()), "processes left after tidal sandbox up stopped"
    # Gone, or (the address block's) locked again since by another sandbox on the machine.
    left = [path for path in locks if holder_pid(path) == sandbox_up.proc.pid]
    assert not left, "lock files left after a clean stop"
    assert not locks[0].exists(), "the directory's lock file left after a clean stop"
