"""Sample a Deployment's desired and ready replicas into a CSV during a load test.

The load-test report (:mod:`loadtests.report`) draws replicas against load;
this is where the replica counts come from. :func:`sample` polls a
:class:`ReplicaReader` every ``interval_s`` and appends one row per poll::

    timestamp,desired,ready,error
    1795270545.012,0,0,
    1795270546.013,1,0,
    1795270547.015,,,"HTTP 503 from https://…: …"

``timestamp`` is wall-clock Unix time, on purpose: it is merged with locust's
stats history, whose rows carry Unix timestamps. Pacing between polls uses
the event loop's monotonic clock. A failed poll is a row with the error and no
counts rather than the end of sampling: an API server that blips during a
test should leave a gap in the chart, not stop the recording.

:class:`KubeDeploymentReader` reads ``spec.replicas`` (desired) and
``status.readyReplicas`` (ready; absent means 0) with one
``GET /apis/apps/v1/namespaces/{ns}/deployments/{name}`` over aiohttp,
authenticated as a kubeconfig says (:func:`load_kubeconfig`: server, CA,
bearer token or client certificate). ``loadtests`` does not import
kubernetes_asyncio (only the ``kube`` packages may), and one GET needs
no client library.

Command line (``python -m loadtests.replicas_sampler``): sample until
interrupted, for ``--duration-s``, or, given a command after ``--``, for as
long as that command runs (its exit status becomes ours)::

    python -m loadtests.replicas_sampler --deployment llama --out out/replicas.csv \\
        -- locust -f loadtests/locustfile.py --headless --shape spike --csv out/run ...
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import csv
import os
import signal
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO
from urllib.parse import quote

import aiohttp
import yaml

__all__ = [
    "CSV_COLUMNS",
    "KubeAccess",
    "KubeDeploymentReader",
    "ReplicaReadError",
    "ReplicaReader",
    "ReplicaReading",
    "load_kubeconfig",
    "main",
    "sample",
]

CSV_COLUMNS = ("timestamp", "desired", "ready", "error")


class ReplicaReadError(RuntimeError):
    """One poll failed; the message says what was asked and what came back."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, when the server answered


@dataclass(frozen=True, slots=True)
class ReplicaReading:
    desired: int
    ready: int


class ReplicaReader(Protocol):
    """Where replica counts come from (the Kubernetes API, or a fake in tests)."""

    async def read(self) -> ReplicaReading: ...


@dataclass(frozen=True)
class KubeAccess:
    """How to reach and authenticate to an API server, as a kubeconfig context says."""

    server: str
    ssl_context: ssl.SSLContext | None  # None: plain http
    token: str | None
    namespace: str


def _material(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    """``key-data`` (base64) or ``key`` (a file, relative to the kubeconfig's folder)."""
    data = entry.get(f"{key}-data")
    if data:
        return base64.b64decode(str(data))
    path = entry.get(key)
    if path:
        return (base / str(path)).read_bytes()
    return None


def _named(items: Any, name: str, kind: str, source: Path) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(kind)
            if isinstance(body, dict):
                return body
    raise ValueError(f"{source}: no {kind} named {name!r}")


def load_kubeconfig(path: Path, *, context: str | None = None) -> KubeAccess:
    """The server, TLS settings, token and namespace of a kubeconfig context.

    Supports what the sandbox and most clusters write: ``server``,
    ``certificate-authority(-data)``, ``insecure-skip-tls-verify``, and a user
    with ``token``, ``tokenFile`` or ``client-certificate(-data)`` plus
    ``client-key(-data)``. Exec and auth-provider plugins are not supported:
    the error says so.
    """
    try:
        config = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ValueError(f"cannot read kubeconfig {path}: {error}") from error
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a kubeconfig (expected a YAML mapping)")
    context_name = context or config.get("current-context")
    if not context_name:
        raise ValueError(f"{path} has no current-context; pass --context")
    ctx = _named(config.get("contexts"), context_name, "context", path)
    cluster = _named(config.get("clusters"), ctx.get("cluster", ""), "cluster", path)
    user: dict[str, Any] = {}
    if ctx.get("user"):
        user = _named(config.get("users"), ctx["user"], "user", path)
    base = path.parent
    server = str(cluster.get("server", "")).rstrip("/")
    if not server.startswith(("https://", "http://")):
        raise ValueError(f"{path}: cluster server {server!r} is not an http(s) URL")
    if "exec" in user or "auth-provider" in user:
        raise ValueError(
            f"{path}: user {ctx.get('user')!r} authenticates with an exec or auth-provider "
            "plugin, which the sampler does not run; use a token (for example from "
            "'kubectl create token') or a client certificate"
        )
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text().strip()
    ssl_context: ssl.SSLContext | None = None
    if server.startswith("https://"):
        ca = _material(cluster, "certificate-authority", base)
        ssl_context = ssl.create_default_context(cadata=ca.decode() if ca else None)
        if cluster.get("insecure-skip-tls-verify"):
            ssl_context.check_hostname = False
            ssl_context.verify_mode = ssl.CERT_NONE
        cert = _material(user, "client-certificate", base)
        key = _material(user, "client-key", base)
        if cert and key:
            # ssl wants files; write them to a private folder only while loading.
            with tempfile.TemporaryDirectory() as folder:
                cert_path, key_path = Path(folder, "cert.pem"), Path(folder, "key.pem")
                cert_path.write_bytes(cert)
                key_path.write_bytes(key)
                key_path.chmod(0o600)
                ssl_context.load_cert_chain(cert_path, key_path)
    return KubeAccess(
        server=server,
        ssl_context=ssl_context,
        token=token or None,
        namespace=str(ctx.get("namespace") or "default"),
    )


class KubeDeploymentReader:
    """Reads one Deployment's ``spec.replicas`` and ``status.readyReplicas``."""

    def __init__(
        self, session: aiohttp.ClientSession, *, access: KubeAccess, namespace: str, name: str
    ) -> None:
        self._session = session
        self._access = access
        self.url = (
            f"{access.server}/apis/apps/v1/namespaces/{quote(namespace, safe='')}"
            f"/deployments/{quote(name, safe='')}"
        )
        self._headers = {"Accept": "application/json"}
        if access.token:
            self._headers["Authorization"] = f"Bearer {access.token}"

    async def read(self) -> ReplicaReading:
        # True (default verification) only matters for https, where a context is always set.
        ssl_arg: ssl.SSLContext | bool = self._access.ssl_context or True
        try:
            async with self._session.get(self.url, headers=self._headers, ssl=ssl_arg) as response:
                text = await response.text()
                if response.status != 200:
                    raise ReplicaReadError(
                        f"HTTP {response.status} from {self.url}: {text[:300]}",
                        status=response.status,
                    )
        except aiohttp.ClientError as error:
            raise ReplicaReadError(f"cannot reach {self.url}: {error!r}") from error
        try:
            body = yaml.safe_load(text)
            desired = int(body["spec"].get("replicas", 1))  # the API's default is 1
            ready = int((body.get("status") or {}).get("readyReplicas", 0))
        except (AttributeError, KeyError, TypeError, ValueError, yaml.YAMLError) as error:
            raise ReplicaReadError(
                f"{self.url} did not answer a Deployment: {text[:300]}"
            ) from error
        return ReplicaReading(desired=desired, ready=ready)


async def sample(
    reader: ReplicaReader,
    out: TextIO,
    *,
    interval_s: float,
    stop: asyncio.Event,
    wall_clock: Callable[[], float] = time.time,
) -> int:
    """Poll ``reader`` every ``interval_s`` until ``stop`` is set; write CSV rows; the row count.

    The header is written first; each row is flushed, so a run that is
    killed still leaves what it saw. A poll is also taken right after
    ``stop`` is set, so the last state is recorded.
    """
    if interval_s <= 0:
        raise ValueError(f"interval must be > 0 s, got {interval_s}")
    loop = asyncio.get_running_loop()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    out.flush()
    rows = 0
    next_at = loop.time()
    while True:
        stopping = stop.is_set()
        try:
            reading = await reader.read()
        except ReplicaReadError as error:
            writer.writerow([f"{wall_clock():.3f}", "", "", str(error)])
        else:
            writer.writerow([f"{wall_clock():.3f}", reading.desired, reading.ready, ""])
        out.flush()
        rows += 1
        if stopping:
            return rows
        next_at += interval_s
        # A slow poll does not cause a burst of catch-up polls.
        next_at = max(next_at, loop.time())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=next_at - loop.time())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadtests.replicas_sampler",
        description="Record a Deployment's desired and ready replicas to CSV, "
        "optionally while running a command (given after --).",
    )
    parser.add_argument("--deployment", required=True, help="Deployment name")
    parser.add_argument(
        "--namespace", default="", help="namespace (default: the kubeconfig context's, or default)"
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    parser.add_argument("--out", type=Path, required=True, help="CSV file to write")
    parser.add_argument(
        "--interval-s", type=float, default=1.0, help="seconds between polls (default 1)"
    )
    parser.add_argument(
        "--duration-s",
        type=float,
        default=0.0,
        help="stop after this many seconds (default: never)",
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- COMMAND ...: sample while it runs"
    )
    return parser


def _kubeconfig_path(given: Path | None) -> Path:
    if given is not None:
        return given
    env = os.environ.get("KUBECONFIG", "")
    if env:
        return Path(env.split(os.pathsep)[0])
    return Path.home() / ".kube" / "config"


async def _run(args: argparse.Namespace) -> int:
    access = load_kubeconfig(_kubeconfig_path(args.kubeconfig), context=args.context)
    namespace = args.namespace or access.namespace
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    child: asyncio.subprocess.Process | None = None

    def on_signal(signum: int) -> None:
        stop.set()
        if child is not None and child.returncode is None:
            child.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    timeout = aiohttp.ClientTimeout(total=max(args.interval_s * 5, 5.0))
    async with aiohttp.ClientSession(timeout=timeout) as session:
        reader = KubeDeploymentReader(
            session, access=access, namespace=namespace, name=args.deployment
        )
        try:
            await reader.read()
        except ReplicaReadError as error:
            # These do not mend themselves: sampling would record only errors.
            if error.status in (401, 403, 404):
                what = "not found" if error.status == 404 else "not readable with these credentials"
                print(
                    f"replicas_sampler: Deployment {namespace}/{args.deployment} is {what} "
                    f"({error}); check --deployment, --namespace and --kubeconfig",
                    file=sys.stderr,
                )
                return 2
        with args.out.open("w", newline="") as out:
            sampler = asyncio.create_task(
                sample(reader, out, interval_s=args.interval_s, stop=stop)
            )
            status = 0
            try:
                if command:
                    child = await asyncio.create_subprocess_exec(*command)
                    status = await child.wait()
                    stop.set()
                elif args.duration_s > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=args.duration_s)
                    stop.set()
                else:
                    await stop.wait()
                rows = await sampler
            finally:
                stop.set()
                if child is not None and child.returncode is None:
                    child.kill()
                    await child.wait()
                if not sampler.done():
                    sampler.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sampler
    print(
        f"replicas: {rows} samples of {namespace}/{args.deployment} in {args.out}", file=sys.stderr
    )
    return status


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.interval_s <= 0:
        print("--interval-s must be > 0", file=sys.stderr)
        return 2
    try:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(_run(args))
    except ValueError as error:  # a bad kubeconfig: say what is wrong, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
