"""The Kubernetes replicas reader over real HTTP on loopback (loadtests.replicas_sampler).

Covers:
- spec.replicas and status.readyReplicas are read with the kubeconfig's
  bearer token, and a missing readyReplicas (the API server omits it at
  zero) reads as 0;
- a refused token and an unreachable server become ReplicaReadError naming
  the Deployment and what came back;
- the command line samples for --duration-s from a kubeconfig into a CSV;
  a Deployment that does not exist ends it at once with status 2 and a
  message naming it, without running the command it was given.
"""

from __future__ import annotations

import asyncio
import csv
import socket
import sys
from pathlib import Path

import pytest

from groundwork.kube.connection import KubeAccess, connect
from loadtests.replicas_sampler import (
    KubeDeploymentReader,
    ReplicaReadError,
    ReplicaReading,
)

from .conftest import ServeApp
from .fakes import kube_app, write_kubeconfig


async def access_to(tmp_path: Path, server: str, token: str) -> KubeAccess:
    return await connect(kubeconfig=str(write_kubeconfig(tmp_path / token, server, token)))


async def test_reads_desired_and_ready(serve: ServeApp, tmp_path: Path) -> None:
    state: list[tuple[int, int | None]] = [(0, None)]
    url = await serve(kube_app(token="tok", replicas=lambda: state[-1]))
    access = await access_to(tmp_path, url, "tok")
    try:
        reader = KubeDeploymentReader(access.api, namespace="models", name="llama")
        assert await reader.read() == ReplicaReading(desired=0, ready=0)
        state.append((3, 2))
        assert await reader.read() == ReplicaReading(desired=3, ready=2)
    finally:
        await access.close()


async def test_refused_token_and_unreachable_server(serve: ServeApp, tmp_path: Path) -> None:
    url = await serve(kube_app(token="tok", replicas=lambda: (1, 1)))
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    wrong = await access_to(tmp_path, url, "nope")
    gone = await access_to(tmp_path, f"http://127.0.0.1:{closed_port}", "any")
    try:
        with pytest.raises(ReplicaReadError, match="Deployment a/b: HTTP 401"):
            await KubeDeploymentReader(wrong.api, namespace="a", name="b").read()
        with pytest.raises(ReplicaReadError, match=r"Deployment a/b: .*Cannot connect"):
            await KubeDeploymentReader(gone.api, namespace="a", name="b").read()
    finally:
        await wrong.close()
        await gone.close()


async def _sampler(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "loadtests.replicas_sampler", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout=30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_command_line_samples_for_a_duration(serve: ServeApp, tmp_path: Path) -> None:
    url = await serve(kube_app(token="tok", replicas=lambda: (2, 1), names=("llama",)))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url, "tok", namespace="models")
    out = tmp_path / "replicas.csv"
    code, output = await _sampler(
        "--kubeconfig", str(kubeconfig), "--deployment", "llama", "--out", str(out),
        "--interval-s", "0.2", "--duration-s", "1",
    )  # fmt: skip
    assert code == 0, output
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert len(rows) >= 3
    assert {(r["desired"], r["ready"], r["error"]) for r in rows} == {("2", "1", "")}
    assert "models/llama" in output

    ran = tmp_path / "ran"
    code, output = await _sampler(
        "--kubeconfig", str(kubeconfig), "--deployment", "nosuch", "--out", str(out),
        "--", "touch", str(ran),
    )  # fmt: skip
    assert code == 2
    assert "Deployment models/nosuch is not found" in output
    assert not ran.exists()
