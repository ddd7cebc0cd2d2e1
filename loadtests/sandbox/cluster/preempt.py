"""``tidal sandbox preempt NODE --dir DIR [--notice 30s] [--return-after 2m]``: preempt a spot node.

Does to a node of a running sandbox what a cloud and its termination
handler do: cordon and taint it as interrupted, wait the notice, delete its
pods with their grace periods, remove the node. It talks to the sandbox's
admin endpoint (``DIR/admin.json``) rather than to the Kubernetes API:
preemption is a cloud-side event that no Kubernetes client can cause, and
running it inside the sandbox lets the node's pods be stopped by the same
kubelet that started them. Blocks until the node is gone and prints what
went with it. With ``--return-after`` the node registers again that long
after it went (spot capacity coming back).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import aiohttp

from loadtests.sandbox.cluster.admin import read_admin_file
from loadtests.sandbox.cluster.quantity import parse_duration
from loadtests.sandbox.directory import add_dir_flag

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("node", metavar="NODE", help="the node to preempt (kubectl get nodes)")
    add_dir_flag(parser, "the directory of the running sandbox cluster")
    parser.add_argument(
        "--notice",
        default="10s",
        metavar="DURATION",
        help="interruption notice before the node goes (default: 10s, short for a demo; "
        "GCP gives 30s, AWS 2m)",
    )
    parser.add_argument(
        "--return-after",
        default=None,
        metavar="DURATION",
        help="bring the node back this long after it went (default: it stays gone)",
    )


async def _preempt(
    directory: Path, node: str, notice_s: float, return_after_s: float | None
) -> int:
    admin = read_admin_file(directory)
    timeout = aiohttp.ClientTimeout(total=notice_s + 600)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(
            f"{admin['url']}/preempt",
            json={"node": node, "notice_s": notice_s, "return_after_s": return_after_s},
            headers={"Authorization": f"Bearer {admin['token']}"},
        ) as resp,
    ):
        body = await resp.json()
    if resp.status != 200:
        print(f"tidal sandbox preempt: {body.get('message', body)}", file=sys.stderr)
        return 1
    print(json.dumps(body))
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        notice_s = parse_duration(args.notice)
    except ValueError as exc:
        print(f"tidal sandbox preempt: --notice: {exc}", file=sys.stderr)
        return 2
    try:
        back = None if args.return_after is None else parse_duration(args.return_after)
    except ValueError as exc:
        print(f"tidal sandbox preempt: --return-after: {exc}", file=sys.stderr)
        return 2
    print(f"preempting {args.node}: notice {notice_s:g}s", file=sys.stderr, flush=True)
    try:
        return asyncio.run(_preempt(args.dir, args.node, notice_s, back))
    except (FileNotFoundError, aiohttp.ClientError, OSError) as exc:
        print(f"tidal sandbox preempt: {exc}", file=sys.stderr)
        return 1
