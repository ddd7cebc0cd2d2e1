"""``tidal sandbox spot-capacity --dir DIR [GPUS|unlimited]``: how much spot the cloud gives out.

A cloud runs out of spot machines; the sandbox's scheduler then keeps new
spot pods Pending (``Insufficient nvidia.com/gpu``, what a real cluster
shows while its autoscaler cannot get spot capacity). ``GPUS`` sets the
spot GPUs given out in all, counting those in use; ``unlimited`` lifts the
limit (spot capacity coming back: Pending spot pods are scheduled at once);
with no argument it prints the limit and the use. Lowering the limit
preempts nothing: ``tidal sandbox preempt`` does that. Talks to the
sandbox's admin endpoint (``DIR/admin.json``), like ``preempt``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp

from loadtests.sandbox.cluster.admin import read_admin_file
from loadtests.sandbox.directory import add_dir_flag

__all__ = ["configure", "parse_gpus", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "gpus",
        nargs="?",
        metavar="GPUS|unlimited",
        help="spot GPUs the cloud gives out in all (omit to show the current limit)",
    )
    add_dir_flag(parser, "the directory of the running sandbox cluster")


def parse_gpus(text: str) -> float | None:
    """``unlimited`` -> None, else a number of GPUs >= 0."""
    if text.strip().lower() == "unlimited":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of GPUs >= 0 or 'unlimited', got {text!r}") from None
    if not value >= 0:
        raise ValueError(f"expected a number of GPUs >= 0 or 'unlimited', got {text!r}")
    return value


async def _call(directory: Path, body: dict[str, Any] | None) -> int:
    admin = read_admin_file(directory)
    headers = {"Authorization": f"Bearer {admin['token']}"}
    url = f"{admin['url']}/spot-capacity"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        if body is None:
            request = session.get(url, headers=headers)
        else:
            request = session.post(url, json=body, headers=headers)
        async with request as resp:
            answer = await resp.json()
    if resp.status != 200:
        print(f"tidal sandbox spot-capacity: {answer.get('message', answer)}", file=sys.stderr)
        return 1
    print(json.dumps(answer))
    return 0


def run(args: argparse.Namespace) -> int:
    body: dict[str, Any] | None = None
    if args.gpus is not None:
        try:
            body = {"gpus": parse_gpus(args.gpus)}
        except ValueError as exc:
            print(f"tidal sandbox spot-capacity: {exc}", file=sys.stderr)
            return 2
    try:
        return asyncio.run(_call(args.dir, body))
    except (FileNotFoundError, aiohttp.ClientError, OSError) as exc:
        print(f"tidal sandbox spot-capacity: {exc}", file=sys.stderr)
        return 1
