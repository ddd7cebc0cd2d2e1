"""The install steps of README.md and docs/operating.md, run as written in the sandbox.

Covers: both pages show the same command block (create the namespace, the
token Secret, ``kubectl apply -k deploy/``, ``rollout status`` of both Tidal
Deployments); run by bash as it stands against ``tidal sandbox cluster
--rbac``, it exits 0: kubectl's protobuf ``create`` bodies are read, and the
sandbox runs the Tidal image as the real ``tidal scaler`` and ``tidal
activator``, which become ready. Each reaches the API as its service
account with only what deploy/'s RBAC grants it (the scaler holds the
Lease); the activators' reports reach the scalers by the Service name
``tidal-scaler.tidal-system``; ``kubectl logs`` shows each service's
output; with the example model applied (deploy/examples/vllm-llama.yaml),
each ``kubectl -n tidal-system port-forward`` the pages show reaches its
service (run on a free local port: 8080 may be taken on a shared machine),
and a completion sent to the forwarded activator is answered by the model.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import RunningCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
_PORT_FORWARD = re.compile(r"kubectl -n tidal-system port-forward (\S+) ([\d:]+)")
_SH_BLOCK = re.compile(r"^([ \t]*)```sh\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def install_block(page: Path) -> str:
    """The ``sh`` block of ``page`` that creates the namespace and applies deploy/."""
    blocks = [textwrap.dedent(m.group(2)) for m in _SH_BLOCK.finditer(page.read_text())]
    found = [b for b in blocks if "kubectl apply -k deploy/" in b and "create namespace" in b]
    assert len(found) == 1, f"{page.name}: expected one install block, found {len(found)}"
    return found[0]


def _reports_accepted(ip: str) -> float:
    with urllib.request.urlopen(f"http://{ip}:8090/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith('tidal_scaler_reports_total{result="accepted"}'):
                return float(line.split()[-1])
    return 0.0


@pytest.fixture
def cluster_dir(sandbox_cluster: Callable[..., RunningCluster]) -> Path:
    return sandbox_cluster("--rbac").directory


def test_install_block_runs_as_written(
    cluster_dir: Path, tmp_path: Path, tool_path: Callable[[str], str]
) -> None:
    tool_path("kubectl")
    block = install_block(ROOT / "README.md")
    assert install_block(ROOT / "docs" / "operating.md") == block
    env = {**os.environ, "KUBECONFIG": str(cluster_dir / "kubeconfig"), "HOME": str(tmp_path)}
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for name in ("tidal-scaler", "tidal-activator"):
        assert f'deployment "{name}" successfully rolled out' in ran.stdout, ran.stdout

    def kubectl(*args: str) -> str:
        done = subprocess.run(
            ["kubectl", "-n", "tidal-system", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    deadline = time.monotonic() + 30
    while True:
        lease = json.loads(kubectl("get", "lease", "tidal-scaler", "-o", "json"))
        if lease["spec"].get("holderIdentity", "").startswith("tidal-scaler-"):
            break
        assert time.monotonic() < deadline, f"no scaler pod took the Lease: {lease}"
        time.sleep(0.5)
    pods = json.loads(
        kubectl("get", "pods", "-l", "app.kubernetes.io/name=tidal-scaler", "-o", "json")
    )
    scalers = [p["status"]["podIP"] for p in pods["items"]]
    deadline = time.monotonic() + 30  # the activators resolve the name again every 10 s
    while not any(_reports_accepted(ip) for ip in scalers):
        assert time.monotonic() < deadline, "no scaler accepted an activator's report"
        time.sleep(1)
    assert "listening on" in kubectl("logs", "deploy/tidal-scaler")
    assert "serving on" in kubectl("logs", "deploy/tidal-activator")

    # Step 3: the example model, opted in; its fake vLLM serves the routed name.
    for args in (
        ("apply", "-f", str(ROOT / "deploy" / "examples" / "vllm-llama.yaml")),
        ("rollout", "status", "deploy/llama", "--timeout=60s"),
    ):
        done = subprocess.run(
            ["kubectl", *args], env=env, capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 0, done.stderr
    pages = (ROOT / "README.md").read_text() + (ROOT / "docs" / "operating.md").read_text()
    shown = sorted(set(_PORT_FORWARD.findall(pages)))
    # svc/tidal-activator, and deploy/tidal-scaler: through the Deployment, as a
    # Service could reach a scaler replica that does not lead.
    assert len(shown) >= 2, shown
    for target, ports in shown:
        _forward_and_ask(env, target, ports)


def _forward_and_ask(env: dict[str, str], target: str, ports: str) -> None:
    """Run the shown port-forward on a free local port; ask the service behind it."""
    remote = ports.split(":")[-1]
    forward = subprocess.Popen(
        ["kubectl", "-n", "tidal-system", "port-forward", target, f":{remote}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> \d+", line)
        assert match, f"{target}: {line}"
        base = f"http://127.0.0.1:{match.group(1)}"
        if "scaler" in target:
            with urllib.request.urlopen(f"{base}/readyz", timeout=10) as answer:
                assert answer.status == 200
            return
        # Through the activator's pod to the model's pod, routed by the model name.
        request = urllib.request.Request(
            f"{base}/v1/completions",
            data=json.dumps({"model": "llama-3-8b", "prompt": "hi", "max_tokens": 4}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert json.load(answer)["model"] == "llama-3-8b"
    finally:
        forward.terminate()
        forward.communicate(timeout=10)
