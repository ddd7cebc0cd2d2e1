"""The sandbox's spot pool from the command line, as a user drives it.

Covers: ``tidal sandbox cluster --spot-capacity 1`` gives out one spot GPU,
so of two spot replicas one stays Pending (kubectl shows it); ``tidal
sandbox spot-capacity`` reports the limit and the use, and ``unlimited``
brings spot capacity back (the rollout completes); ``tidal sandbox
preempt --return-after`` removes a node, which then registers again; bad
values are refused with exit status 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import RunningCluster

pytestmark = [pytest.mark.e2e]

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
      annotations: {sandbox.tidal.dev/process: none}
    spec:
      nodeSelector: {karpenter.sh/capacity-type: spot}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.6.3
        resources: {limits: {nvidia.com/gpu: "1"}}
"""


def tidal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaler", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def sandbox(sandbox_cluster: Callable[..., RunningCluster]) -> Path:
    return sandbox_cluster("--spot-capacity", "1").directory


def test_spot_runs_out_comes_back_and_nodes_return(
    sandbox: Path, tool_path: Callable[[str], str]
) -> None:
    kubeconfig = str(sandbox / "kubeconfig")

    def kubectl(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [tool_path("kubectl"), "--kubeconfig", kubeconfig, *args],
            input=stdin, capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"kubectl {args}: {result.stderr}"
        return result.stdout

    kubectl("apply", "-f", "-", stdin=MANIFEST)
    deadline = time.monotonic() + 30
    while True:
        pods = json.loads(kubectl("get", "pods", "-l", "app=llama", "-o", "json"))["items"]
        pending = [p for p in pods if not p["spec"].get("nodeName")]
        conditions = [c for p in pending for c in p["status"].get("conditions") or ()]
        if len(pods) == 2 and len(pending) == 1 and conditions:
            break
        assert time.monotonic() < deadline, f"expected one Pending pod of two, got {pods}"
        time.sleep(0.2)
    assert "Insufficient nvidia.com/gpu" in conditions[0]["message"]
    shown = tidal("sandbox", "spot-capacity", "--dir", str(sandbox))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"gpus": 1.0, "in_use": 1.0}

    lifted = tidal("sandbox", "spot-capacity", "unlimited", "--dir", str(sandbox))
    assert lifted.returncode == 0, lifted.stderr
    assert json.loads(lifted.stdout)["gpus"] is None
    kubectl("rollout", "status", "deployment/llama", "--timeout=60s")

    bad = tidal("sandbox", "spot-capacity", "lots", "--dir", str(sandbox))
    assert bad.returncode == 2 and "'unlimited'" in bad.stderr
    bad = tidal("sandbox", "preempt", "gpu-spot-1", "--dir", str(sandbox), "--return-after", "x")
    assert bad.returncode == 2 and "--return-after" in bad.stderr

    gone = tidal("sandbox", "preempt", "gpu-spot-4", "--dir", str(sandbox), "--notice", "0.2s",
                 "--return-after", "1s")  # fmt: skip
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["return_after_s"] == 1.0
    deadline = time.monotonic() + 20
    while "node/gpu-spot-4" not in kubectl("get", "nodes", "-o", "name"):
        assert time.monotonic() < deadline, "gpu-spot-4 did not come back"
        time.sleep(0.2)
