"""The kubectl watches ``tidal sandbox up``'s banner shows, run as shown.

Covers: each watch works against the emulated API server (prints its table
and keeps watching); the form the banner used to show,
``kubectl get deploy,pods -w``, fails, as tests/unit/docs/test_shown_commands.py
assumes when it refuses it anywhere in the docs and the banner.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtests.sandbox.up import try_commands


class _Stack:  # the parts of a SandboxStack that try_commands reads
    """What try_commands reads from a stack: its addresses and kubeconfig."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.scaler_url = "http://127.9.0.2:8090"
        self.activator_admin_url = "http://127.9.0.3:9091"
        self.activator_url = "http://127.9.0.3:8080"


_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: llama}}
  template:
    metadata: {labels: {app: llama}}
    spec:
      containers: [{name: vllm, image: vllm/vllm-openai}]
---
apiVersion: v1
kind: Pod
metadata: {name: llama-0, namespace: default, labels: {app: llama}}
spec:
  containers: [{name: vllm, image: vllm/vllm-openai}]
"""


async def _watch(binary: str, kubeconfig: Path, home: Path, *args: str) -> tuple[int | None, str]:
    """Run a kubectl watch until it prints its first line (or exits); then stop it.

    (exit code, or None when it was still watching; what it printed)."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
    process = await asyncio.create_subprocess_exec(
        binary, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    assert process.stdout is not None
    try:
        first = await asyncio.wait_for(process.stdout.readline(), 20)
        # A watch that works keeps running after its header; an error exits.
        try:
            await asyncio.wait_for(process.wait(), 1.0)
        except TimeoutError:
            code = None
        else:
            code = process.returncode
    finally:
        if process.returncode is None:
            process.terminate()
        rest, _ = await process.communicate()
    return code, first.decode() + rest.decode()


async def test_banner_watches_work_and_the_old_form_fails(
    kubeconfig: Path, tmp_path: Path, tool_path: Callable[[str], str], kubectl: Any
) -> None:
    binary = tool_path("kubectl")
    applied = await kubectl("apply", "-f", "-", stdin=_DEPLOYMENT)
    assert applied.code == 0, applied.err
    watches = [
        command.split("kubectl ", 1)[1].split()
        for _, command in try_commands(_Stack(kubeconfig), None)  # type: ignore[arg-type]
        if " -w" in command
    ]
    assert len(watches) == 2
    for args in watches:
        code, output = await _watch(binary, kubeconfig, tmp_path, *args)
        assert code is None, output  # still watching
        assert output.startswith("NAME"), output
    code, output = await _watch(binary, kubeconfig, tmp_path, "get", "deploy,pods", "-w")
    assert code not in (None, 0)
    assert "single resource type" in output
