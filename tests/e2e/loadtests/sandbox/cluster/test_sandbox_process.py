"""The sandbox cluster as a process: kubectl end to end, and pods dying with it.

Covers: ``tidal sandbox cluster --dir D`` writes a kubeconfig that kubectl
uses to apply a Deployment and Service of fake vLLM servers, wait for the
rollout and the pods' Ready condition, and see EndpointSlices; a pod answers
on its own address; ``tidal sandbox preempt`` removes a node and its pod is
replaced elsewhere; when the sandbox process is SIGKILLed, every pod process
dies with it (nothing is left running).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import descendants
from tests.e2e.conftest import RunningCluster

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama, labels: {app: llama}}
spec:
  replicas: 2
  selector: {matchLabels: {app: llama}}
  template:
    metadata:
      labels: {app: llama}
      annotations:
        sandbox.tidal.dev/model: tiny
        sandbox.tidal.dev/startup-delay: 0.5s
    spec:
      terminationGracePeriodSeconds: 5
      nodeSelector: {karpenter.sh/capacity-type: spot}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.6.3
        ports: [{name: http, containerPort: 8000}]
        resources: {limits: {nvidia.com/gpu: "1"}}
        readinessProbe: {httpGet: {path: /health, port: http}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: llama}
spec:
  selector: {app: llama}
  ports: [{name: http, port: 80, targetPort: http}]
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.fixture
def sandbox(
    sandbox_cluster: Callable[..., RunningCluster],
) -> tuple[subprocess.Popen[bytes], Path]:
    cluster = sandbox_cluster()
    return cluster.proc, cluster.directory


def kubectl_in(directory: Path, tool_path: Callable[[str], str]) -> Callable[..., str]:
    binary = tool_path("kubectl")

    def run(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [binary, "--kubeconfig", str(directory / "kubeconfig"), *args],
            input=stdin.encode() if stdin is not None else None,
            capture_output=True,
            timeout=90,
            check=False,
        )
        assert result.returncode == 0, f"kubectl {args}: {result.stderr.decode()}"
        return result.stdout.decode()

    return run


def test_kubectl_end_to_end_then_sigkill_takes_pods_along(
    sandbox: tuple[subprocess.Popen[bytes], Path], tool_path: Callable[[str], str]
) -> None:
    proc, directory = sandbox
    kubectl = kubectl_in(directory, tool_path)
    kubectl("apply", "-f", "-", stdin=MANIFEST)
    kubectl("rollout", "status", "deployment/llama", "--timeout=60s")
    kubectl("wait", "--for=condition=Ready", "pod", "-l", "app=llama", "--timeout=60s")
    pods = json.loads(kubectl("get", "pods", "-l", "app=llama", "-o", "json"))["items"]
    assert len(pods) == 2
    assert all(p["spec"]["nodeName"].startswith("gpu-spot-") for p in pods)
    ip = pods[0]["status"]["podIP"]
    with urllib.request.urlopen(f"http://{ip}:8000/v1/models", timeout=10) as resp:
        assert json.load(resp)["data"][0]["id"] == "tiny"
    slices = json.loads(kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=llama",
                                "-o", "json"))["items"]  # fmt: skip
    ready = [e for s in slices for e in s["endpoints"] if e["conditions"]["ready"]]
    assert sorted(e["addresses"][0] for e in ready) == sorted(p["status"]["podIP"] for p in pods)
    # Preempt the node of the first pod: the pod is replaced on another spot node.
    node = pods[0]["spec"]["nodeName"]
    result = subprocess.run(
        [sys.executable, "-m", "scaler", "sandbox", "preempt", node, "--dir", str(directory),
         "--notice", "0.5s"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout)["pods_deleted"] == [f"default/{pods[0]['metadata']['name']}"]
    assert node not in kubectl("get", "nodes", "-o", "name")
    kubectl("rollout", "status", "deployment/llama", "--timeout=60s")
    nodes = kubectl("get", "pods", "-l", "app=llama", "-o", "jsonpath={.items[*].spec.nodeName}")
    assert node not in nodes.split() and len(nodes.split()) == 2
    # SIGKILL the sandbox: no pod process may outlive it.
    children = descendants(proc.pid)
    assert len(children) >= 3  # the zygote and two servers at least
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in children if alive(pid)]
