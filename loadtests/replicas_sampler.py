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
``status.readyReplicas`` (ready; absent means 0) with one read of the
Deployment (:func:`groundwork.kube.raw.read_deployment`), connected as
the activator and the scaler connect (:func:`groundwork.kube.connection.connect`:
``--kubeconfig``, ``$KUBECONFIG``, in-cluster, ``~/.kube/config``).

Command line (``python -m loadtests.replicas_sampler``): sample until
interrupted, for ``--duration-s``, or, given a command after ``--``, for as
long as that command runs (its exit status becomes ours)::

    python -m loadtests.replicas_sampler --deployment llama --out out/replicas.csv \\
        -- locust -f loadtests/locustfile.py --headless --shape spike --csv out/run ...
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

from groundwork.kube.connection import KubeConfigError, connect
from groundwork.kube.errors import KubeError
from groundwork.kube.raw import read_deployment

__all__ = [
    "CSV_COLUMNS",
    "KubeDeploymentReader",
    "ReplicaReadError",
    "ReplicaReader",
    "ReplicaReading",
    "main",
    "sample",
]

CSV_COLUMNS = ("timestamp", "desired", "ready", "error")


class ReplicaReadError(RuntimeError):
    """One poll failed; the message says what was asked and what came back.
    ``status``: the API server's HTTP status, when it answered."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ReplicaReading:
    desired: int
    ready: int


class ReplicaReader(Protocol):
    """Where replica counts come from (the Kubernetes API, or a fake in tests)."""

    async def read(self) -> ReplicaReading: ...


class KubeDeploymentReader:
    """Reads one Deployment's ``spec.replicas`` and ``status.readyReplicas``."""

    def __init__(
        self, api: Any, *, namespace: str, name: str, request_timeout_s: float = 10.0
    ) -> None:
        self._api = api
        self.namespace = namespace
        self.name = name
        self._request_timeout_s = request_timeout_s

    async def read(self) -> ReplicaReading:
        try:
            body = await read_deployment(
                self._api,
                namespace=self.namespace,
                name=self.name,
                request_timeout_s=self._request_timeout_s,
            )
        except KubeError as error:
            raise ReplicaReadError(str(error), status=error.status) from error
        try:
            desired = int(body["spec"].get("replicas", 1))  # the API's default is 1
            ready = int((body.get("status") or {}).get("readyReplicas", 0))
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise ReplicaReadError(
                f"{self.namespace}/{self.name}: the answer is not a Deployment: {str(body)[:300]}"
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
        help="kubeconfig file (default: $KUBECONFIG, in-cluster, else ~/.kube/config)",
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


async def _run(args: argparse.Namespace) -> int:
    access = await connect(
        kubeconfig=str(args.kubeconfig) if args.kubeconfig else None, context=args.context
    )
    try:
        return await _sample_while(args, access.api, args.namespace or access.namespace)
    finally:
        await access.close()


async def _sample_while(args: argparse.Namespace, api: Any, namespace: str) -> int:
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
    reader = KubeDeploymentReader(
        api,
        namespace=namespace,
        name=args.deployment,
        request_timeout_s=max(args.interval_s * 5, 5.0),
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
        sampler = asyncio.create_task(sample(reader, out, interval_s=args.interval_s, stop=stop))
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
    except KubeConfigError as error:  # no usable kubeconfig: say what is wrong, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
