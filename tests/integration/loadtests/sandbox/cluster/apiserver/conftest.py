"""Fixtures for the API server tests: a server in the test's loop, kubectl, raw HTTP.

The server runs in-process on the test's event loop; kubectl runs through
asyncio subprocesses so the loop keeps serving while it works. The official
synchronous client runs in a worker thread for the same reason.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from loadtests.sandbox.cluster.apiserver import ApiServer
from loadtests.sandbox.cluster.store import Store


@dataclass
class KubectlResult:
    code: int
    out: str
    err: str


@dataclass
class Api:
    """A raw HTTPS client for the server (admin token unless told otherwise)."""

    server: ApiServer
    session: aiohttp.ClientSession
    ssl_context: ssl.SSLContext

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        token: str | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
        headers = {"Accept": accept}
        if token != "":
            headers["Authorization"] = f"Bearer {token or self.server.admin_token}"
        data = None
        if body is not None:
            import json

            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            headers["Content-Type"] = content_type
        async with self.session.request(
            method,
            self.server.url + path,
            data=data,
            headers=headers,
            params=params,
            ssl=self.ssl_context,
        ) as response:
            text = await response.text()
            try:
                import json

                parsed: Any = json.loads(text)
            except ValueError:
                parsed = text
            return response.status, parsed, response.headers


@pytest_asyncio.fixture
async def store() -> Store:
    return Store()


@pytest_asyncio.fixture
async def server(store: Store, tmp_path: Path) -> AsyncIterator[ApiServer]:
    srv = ApiServer(store, certs_dir=tmp_path / "pki", bookmark_interval_s=0.5)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest_asyncio.fixture
async def rbac_server(store: Store, tmp_path: Path) -> AsyncIterator[ApiServer]:
    srv = ApiServer(store, certs_dir=tmp_path / "pki", rbac=True)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest_asyncio.fixture
async def api(server: ApiServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(server, session, server.certificates.client_context())


@pytest.fixture
def kubeconfig(server: ApiServer, tmp_path: Path) -> Path:
    return server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kubectl(
    kubeconfig: Path, tmp_path: Path, tool_path: Callable[[str], str]
) -> Callable[..., Any]:
    binary = tool_path("kubectl")
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "KUBECACHEDIR": str(tmp_path / "kube-cache"),
        "HOME": str(tmp_path),
    }

    async def run(*args: str, stdin: str | None = None, timeout_s: float = 60) -> KubectlResult:
        process = await asyncio.create_subprocess_exec(
            binary,
            *args,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(
                process.communicate(stdin.encode() if stdin is not None else None), timeout_s
            )
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert process.returncode is not None
        return KubectlResult(process.returncode, out.decode(), err.decode())

    return run
