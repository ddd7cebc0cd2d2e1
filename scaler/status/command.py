"""The ``tidal status`` command: its flags, what it reads, and how it prints.

It lists the opted-in Deployments, the InferencePools and what they bind,
the spot companions (when a model has a spot placement) and the Deployments
whose opt-in label opts nothing in, from the API server; with
``--scaler-url`` the live values of ``GET /v1/targets``. ``-o json`` prints
the rows as JSON, else the table (:mod:`scaler.status.table`).

Main decision: an unreachable scaler costs only the live columns (the error
on stderr, exit status 1), and output cut short by its reader ends quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from groundwork.kube.connection import KubeConfigError, connect
from groundwork.kube.errors import KubeError
from scaler.kube.listing import (
    list_companions,
    list_not_opted_in,
    list_opted_in,
    list_pools,
    list_shape_companions,
)
from scaler.kube.types import ENABLED_LABEL, CompanionInfo
from scaler.status.notes import devices_line, not_opted_in_lines
from scaler.status.pools import pool_rows
from scaler.status.rows import rows, spot_policy
from scaler.status.table import render_table

__all__ = ["HELP_LEGEND", "configure", "run", "scaler_url", "write_out"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, in-cluster)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="only this namespace (default: all namespaces)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    parser.add_argument(
        "--scaler-url",
        type=scaler_url,
        metavar="URL",
        help="scaler base URL (e.g. http://127.0.0.1:8090) for live signal values "
        "(default: none, the API server's view only)",
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="timeout of each request, seconds (default 10)",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "wide", "json"),
        default="table",
        help="table: the columns that fit 100 characters (default); wide: every column, "
        "as kubectl's -o wide; json: the rows as JSON",
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = HELP_LEGEND


def scaler_url(text: str) -> str:
    """``--scaler-url``: an http(s) URL with a host; anything else says what to write."""
    value = text.strip()
    parts = urlsplit(value)
    if parts.scheme in ("http", "https") and parts.hostname:
        return value
    hint = f"; did you mean http://{value}?" if "://" not in value and value else ""
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a scaler URL: use http://HOST:PORT, such as http://127.0.0.1:8090{hint}"
    )


#: What MODE and the reasons mean, for ``tidal status --help``.
HELP_LEGEND = """\
columns:
  DESIRED      replicas Tidal wants (live from the scaler with --scaler-url, else as
               last written to the status annotation)
  MODE         stable: sized on the stable window's average; panic: the panic window's
               load reached panic-threshold-percentage of what the ready replicas can
               take, so it scales up at once and never down, until a whole stable
               window passes without crossing the threshold again
  REASON       why the scale last changed: Activated (woken from zero by a request),
               ScaledUp, ScaledDown, ScaledToZero, or InvalidAnnotation (left alone)
  LIVE-REASON  what the scaler says now: one of the above, or Steady (no change),
               Holding (would go lower, but the scale-down delay or the grace period
               holds it), NoData (a signal needed to go lower is missing or stale)
  CONCURRENCY  requests in flight plus held per model, stable window average
  -o wide adds ON-DEMAND, SPOT, LIVE-DESIRED, QUEUE, KV-CACHE, GPU, $/H, SAVED-$/H
  and the warm tier's ASLEEP, WAKES, LAST-WAKE.
"""


async def _live(
    url: str, timeout_s: float
) -> tuple[dict[str, Mapping[str, Any]], Mapping[str, Any] | None]:
    """The leader's live view: each target's, and the GPU devices held (None: not said)."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url.rstrip("/") + "/v1/targets") as resp,
    ):
        resp.raise_for_status()
        body = await resp.json()
    targets: dict[str, Mapping[str, Any]] = {
        t["target"]: t for t in body.get("targets") or () if isinstance(t, dict)
    }
    devices = body.get("devices")
    return targets, devices if isinstance(devices, dict) else None


async def _main(args: argparse.Namespace) -> int:
    access = await connect(kubeconfig=args.kubeconfig, context=args.context)
    namespace = None if args.all_namespaces else args.namespace
    companions: dict[str, CompanionInfo] = {}
    try:
        deployments = await list_opted_in(
            access.api, namespace=namespace, request_timeout_s=args.timeout_s
        )
        pool_states, bound = await list_pools(
            access.api, namespace=namespace, request_timeout_s=args.timeout_s
        )
        # A Deployment a pool scales is listed whether or not it carries the label.
        listed = {d.key for d in deployments}
        deployments += [d for key, (d, _) in bound.items() if key not in listed]
        deployments.sort(key=lambda d: d.key)
        labelled = await list_not_opted_in(
            access.api, namespace=namespace, request_timeout_s=args.timeout_s
        )
        if any(spot_policy(d) for d in deployments):
            companions = await list_companions(
                access.api, namespace=namespace, request_timeout_s=args.timeout_s
            )
        shape_companions = await list_shape_companions(
            access.api, namespace=namespace, request_timeout_s=args.timeout_s
        )
    finally:
        await access.close()
    live = None
    devices = None
    failed = False
    if args.scaler_url:
        try:
            live, devices = await _live(args.scaler_url, args.timeout_s)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            # The API's view is still worth showing; only the live columns go.
            reason = str(exc) or type(exc).__name__
            print(
                f"tidal status: no live values: scaler at {args.scaler_url}: {reason} "
                "(the table shows what the API server holds)",
                file=sys.stderr,
            )
            failed = True
    table = rows(
        deployments, live, companions, {k: p for k, (_, p) in bound.items()}, shape_companions
    )
    pools = pool_rows(pool_states, live)
    if args.output == "json":
        table += pools
        table += [
            {"namespace": key.split("/")[0], "name": key.split("/")[1], "opted_in": False,
             "problem": f'label {ENABLED_LABEL}="{value}": only "true" opts in'}
            for key, value in labelled
        ]  # fmt: skip
        text = json.dumps(table, indent=2)
    elif table or pools:
        text = render_table(table, wide=args.output == "wide", pools=pools)
    else:
        text = (
            "no opted-in Deployments (label autoscaling.tidal.dev/enabled=true) or InferencePools"
        )
    if args.output != "json":
        text = "\n".join([text, *devices_line(devices), *not_opted_in_lines(labelled)])
    write_out(text)
    return 1 if failed else 0


def write_out(text: str) -> None:
    """Print ``text``; a reader that stopped reading (``tidal status | head``) is not an
    error: the rest is dropped without a traceback."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that
        # flush has nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_main(args))
    except (KubeConfigError, KubeError) as exc:
        print(f"tidal status: {exc}", file=sys.stderr)
        return 1
