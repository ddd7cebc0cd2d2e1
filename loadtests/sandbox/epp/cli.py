"""``tidal sandbox epp``: run a fake endpoint picker (Gateway and EPP in one) for an InferencePool.

Connects to the cluster as the services do (``--kubeconfig``, else
``$KUBECONFIG``, else in-cluster, else ``~/.kube/config``), watches the
InferencePool ``--pool`` in ``--namespace`` and its pods, and serves:

- the gateway on ``--port``: send OpenAI-style requests there; they are
  held while the pool has no ready endpoint (up to
  ``--no-endpoint-request-ttl``), then proxied to the least-loaded one;
- the router's metrics on ``--metrics-port`` (``/metrics``).

The flow-control flags carry the router's names and defaults
(``defaultRequestTTL``, ``noEndpointRequestTTL``, a band's ``maxRequests``
and ``maxBytes``, the concurrency detector's ``maxConcurrency``).
``--objective NAME=PRIORITY`` (repeatable) gives a request that names
objective NAME in ``x-llm-d-inference-objective`` that priority, as an
InferenceObjective would.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from groundwork.kube.connection import KubeConfigError, connect
from loadtests.sandbox.cluster.quantity import parse_duration
from loadtests.sandbox.epp.service import EppConfig, FakeEpp
from loadtests.sandbox.epp.waiting_room import FlowControlLimits

__all__ = ["config_from_args", "configure", "main", "run"]


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _objective(text: str) -> tuple[str, int]:
    name, sep, priority = text.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name, int(priority)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"objective {text!r}: expected NAME=PRIORITY with a whole-number priority "
            "(e.g. critical=10, batch=-1)"
        ) from None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", required=True, metavar="NAME", help="the InferencePool's name")
    parser.add_argument(
        "--namespace",
        default=None,
        metavar="NAMESPACE",
        help="the pool's namespace (unset: the kubeconfig context's)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        metavar="PATH",
        help="kubeconfig to use (unset: $KUBECONFIG, else in-cluster, else ~/.kube/config)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address to listen on (default %(default)s)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=8081,
        metavar="PORT",
        help="the gateway's port, where clients send requests (default %(default)s; 0: any free)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=9090,
        metavar="PORT",
        help="the router's /metrics port (default %(default)s, as the router's; 0: any free)",
    )
    parser.add_argument(
        "--default-request-ttl",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="queue-wait budget while the pool has endpoints, the router's defaultRequestTTL "
        "(default 60s; 0: no limit)",
    )
    parser.add_argument(
        "--no-endpoint-request-ttl",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="queue-wait budget while the pool has no endpoint: the scale-from-zero waiting "
        "room, the router's noEndpointRequestTTL (unset: --default-request-ttl; 0: no limit)",
    )
    parser.add_argument(
        "--band-max-requests",
        type=int,
        default=5000,
        metavar="COUNT",
        help="requests one priority band may hold (default %(default)s, as the router's)",
    )
    parser.add_argument(
        "--band-max-bytes",
        type=int,
        default=1_000_000_000,
        metavar="BYTES",
        help="request bytes one priority band may hold (default %(default)s, as the router's)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=100,
        metavar="COUNT",
        help="requests in flight per endpoint before it has no room (default %(default)s)",
    )
    parser.add_argument(
        "--sweep-interval",
        type=_duration,
        default=1.0,
        metavar="DURATION",
        help="how often held requests are checked against their budget (default 1s)",
    )
    parser.add_argument(
        "--objective",
        type=_objective,
        action="append",
        default=[],
        metavar="NAME=PRIORITY",
        help="a request naming objective NAME (x-llm-d-inference-objective) gets PRIORITY; "
        "repeatable (default: none; any other request: priority 0)",
    )


def config_from_args(args: argparse.Namespace, *, namespace: str) -> EppConfig:
    """The EPP's configuration; ``ValueError`` names a bad value."""
    # Left unset, the no-endpoint budget follows the default one, as in the router.
    no_endpoint = args.no_endpoint_request_ttl
    limits = FlowControlLimits(
        default_request_ttl_s=args.default_request_ttl,
        no_endpoint_request_ttl_s=args.default_request_ttl if no_endpoint is None else no_endpoint,
        band_max_requests=args.band_max_requests,
        band_max_bytes=args.band_max_bytes,
    )
    if args.max_concurrency < 1:
        raise ValueError(f"--max-concurrency must be >= 1, got {args.max_concurrency}")
    if not args.sweep_interval > 0:
        raise ValueError(f"--sweep-interval must be > 0, got {args.sweep_interval}")
    return EppConfig(
        pool=args.pool,
        namespace=namespace,
        host=args.host,
        port=args.port,
        metrics_port=args.metrics_port,
        limits=limits,
        max_concurrency=args.max_concurrency,
        sweep_interval_s=args.sweep_interval,
        objectives=tuple(args.objective),
    )


async def _serve(args: argparse.Namespace) -> int:
    try:
        access = await connect(kubeconfig=str(args.kubeconfig) if args.kubeconfig else None)
    except KubeConfigError as exc:
        print(f"tidal sandbox epp: {exc}", file=sys.stderr)
        return 2
    try:
        try:
            config = config_from_args(args, namespace=args.namespace or access.namespace)
        except ValueError as exc:
            print(f"tidal sandbox epp: {exc}", file=sys.stderr)
            return 2
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with FakeEpp(config, access=access) as epp:
            print(
                f"fake EPP for InferencePool {config.namespace}/{config.pool}: gateway "
                f"{epp.gateway_url}, metrics {epp.metrics_url}",
                file=sys.stderr,
                flush=True,
            )
            await stop.wait()
        return 0
    finally:
        await access.close()


def run(args: argparse.Namespace) -> int:
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_serve(args))


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="tidal sandbox epp")
    configure(parser)
    return run(parser.parse_args(list(argv)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
