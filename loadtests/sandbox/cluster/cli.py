"""``tidal sandbox cluster``: run the emulated cluster until interrupted.

Starts :class:`SandboxCluster` in ``--dir`` (default pool, or ``--nodes
FILE`` or a pool's name such as ``gpu-mix``, see ``node_pools``; RBAC
enforced with ``--rbac``; spot GPUs limited with ``--spot-capacity``),
prints where the kubeconfig is, and runs until SIGINT or SIGTERM, then
stops everything it started (pod processes included). The flags are plain flags rather than pydantic
settings: the sandbox is a test world with a handful of knobs, none of them
scaler or activator settings.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import uvloop

from loadtests.sandbox.cluster.controllers.kubelet import KubeletSettings
from loadtests.sandbox.cluster.node_pools import resolve_nodes
from loadtests.sandbox.cluster.nodes import NodeSpec
from loadtests.sandbox.cluster.quantity import parse_duration
from loadtests.sandbox.cluster.spot_capacity import parse_gpus
from loadtests.sandbox.directory import add_dir_flag

if TYPE_CHECKING:
    from loadtests.sandbox.cluster.cluster import SandboxCluster

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    add_dir_flag(
        parser, "directory for kubeconfig, certificates, admin.json and pod logs (created)"
    )
    parser.add_argument(
        "--nodes",
        metavar="FILE|POOL",
        help="YAML/JSON nodes file, or a pool: 'default' (2 on-demand + 4 spot nodes, 8 GPUs "
        "each, 2 zones) or 'gpu-mix' (modelled H100, H100 and A100 MIG, L4 nodes)",
    )
    parser.add_argument(
        "--rbac", action="store_true", help="enforce RBAC (default: every token may do anything)"
    )
    parser.add_argument(
        "--spot-capacity",
        default="unlimited",
        metavar="GPUS|unlimited",
        help="spot GPUs the cloud gives out in all; spot pods past it stay Pending "
        "(default: unlimited; change it live with 'tidal sandbox spot-capacity')",
    )
    parser.add_argument(
        "--crash-backoff",
        default="10s",
        metavar="DURATION",
        help="first restart back-off of a crashed pod, doubling to 5m (default: 10s, as a kubelet)",
    )


async def _serve(args: argparse.Namespace) -> int:
    from loadtests.sandbox.cluster.cluster import DirectoryInUse, SandboxCluster

    try:
        nodes = resolve_nodes(args.nodes)
        backoff_s = parse_duration(args.crash_backoff)
        spot_gpus = parse_gpus(args.spot_capacity)
    except (OSError, ValueError) as exc:
        print(f"tidal sandbox cluster: {exc}", file=sys.stderr)
        return 2
    directory: Path = args.dir.resolve()
    settings = KubeletSettings(backoff_base_s=backoff_s, log_dir=directory / "logs")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        return await _serve_cluster(
            SandboxCluster(directory, nodes=nodes, rbac=args.rbac, kubelet=settings),
            nodes,
            spot_gpus,
            stop,
        )
    except DirectoryInUse as exc:
        print(f"tidal sandbox cluster: {exc}", file=sys.stderr)
        return 1


async def _serve_cluster(
    sandbox: SandboxCluster, nodes: Sequence[NodeSpec], spot_gpus: float | None, stop: asyncio.Event
) -> int:
    async with sandbox as cluster:
        assert cluster.api is not None
        assert cluster.addresses is not None
        assert cluster.plane is not None
        cluster.plane.scheduler.set_spot_capacity(spot_gpus)
        print(f"kubeconfig: {cluster.kubeconfig}", flush=True)
        print(f"API server: {cluster.api.url} (addresses {cluster.addresses.cidr})", flush=True)
        print(f"nodes: {', '.join(n.name for n in nodes)}", flush=True)
        print(f"try: KUBECONFIG={cluster.kubeconfig} kubectl get nodes", flush=True)
        await stop.wait()
        print("stopping the sandbox cluster", flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_serve(args))
