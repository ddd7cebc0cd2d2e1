"""``tidal status``: what Tidal is doing to each opted-in Deployment.

From the API server: desired and ready replicas, the spot/on-demand split,
mode and last reason (from the ``autoscaling.tidal.dev/status`` annotation,
which holds only discrete state). With ``--scaler-url`` it adds the live
values the scaler serves at ``GET /v1/targets`` (signals move every tick, so
they are never written to the API). ``-o json`` prints the same rows as JSON.
With the warm tier in use (``autoscaling.tidal.dev/sleep-after``), the live
view also shows how many replicas sleep, the wakes so far and the last wake's
duration.

Two reasons, said apart: REASON is why the scale *last changed* (from the
status annotation, written only at a change), LIVE-REASON what the scaler
says *now* (``GET /v1/targets``); they differ whenever the scaler holds a
scale for another reason than the one that set it. The table says so under
itself when it shows both.

An unreachable scaler costs only the live columns: the table from the API
is still printed (with the error on stderr and exit status 1). A
``--scaler-url`` without a scheme is refused with the form to use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from scaler.kube.client import KubeConfigError, connect
from scaler.kube.errors import KubeError
from scaler.kube.listing import list_opted_in
from scaler.kube.types import STATUS_ANNOTATION, DeploymentInfo
from scaler.policy.annotations import InvalidAnnotation, parse_scaling_config

__all__ = ["configure", "render_table", "rows", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG, in-cluster)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="only this namespace (default: all namespaces)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    parser.add_argument(
        "--scaler-url",
        type=scaler_url,
        help="scaler base URL (e.g. http://127.0.0.1:8090) for live signal values",
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=10.0,
        help="timeout of each request, seconds (default 10)",
    )
    parser.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="output format"
    )


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


_LEGEND = (
    "REASON: why the scale last changed (status annotation); "
    "LIVE-REASON: what the scaler says now (GET /v1/targets)"
)


def _status(d: DeploymentInfo) -> dict[str, Any]:
    raw = d.annotations.get(STATUS_ANNOTATION)
    if not raw:
        return {}
    try:
        got = json.loads(raw)
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def rows(
    deployments: Sequence[DeploymentInfo], live: Mapping[str, Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One row per Deployment: API state, plus live values when ``live`` is given."""
    out = []
    for d in deployments:
        st = _status(d)
        row: dict[str, Any] = {
            "namespace": d.namespace,
            "name": d.name,
            "replicas": d.spec_replicas,
            "ready": d.ready_replicas,
            "desired": st.get("desired"),
            "on_demand": st.get("onDemand"),
            "spot": st.get("spot"),
            "mode": st.get("mode"),
            "reason": st.get("reason"),
            "last_change": st.get("lastChangeTime"),
        }
        # The scaler leaves a Deployment with a bad annotation alone, so its
        # status annotation goes stale: say why here, from the same parser.
        try:
            parse_scaling_config(d.annotations)
        except InvalidAnnotation as exc:
            row["reason"] = "InvalidAnnotation"
            row["problem"] = str(exc)
        if live is not None:
            view = live.get(d.key) or {}
            signals = view.get("signals") or {}
            row["live"] = {
                "desired": view.get("desired"),
                "mode": view.get("mode"),
                "reason": view.get("reason"),
                "signals": signals,
                "observed": view.get("observed") or {},
            }
            warm = view.get("warm")
            if isinstance(warm, Mapping):
                pods = warm.get("pods") or {}
                row["live"]["warm"] = {
                    "asleep": sum(
                        1
                        for p in pods.values()
                        if isinstance(p, Mapping) and p.get("phase") == "sleeping"
                    ),
                    "wakes": warm.get("wakes"),
                    "sleeps": warm.get("sleeps"),
                    "failed_wakes": warm.get("failedWakes"),
                    "last_wake_s": warm.get("lastWakeSeconds"),
                }
        out.append(row)
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def render_table(table: Sequence[Mapping[str, Any]]) -> str:
    headers = ["NAMESPACE", "NAME", "DESIRED", "READY", "ON-DEMAND", "SPOT", "MODE", "REASON"]
    keys = ["namespace", "name", "desired", "ready", "on_demand", "spot", "mode", "reason"]
    with_live = any("live" in r for r in table)
    if with_live:
        headers += ["LIVE-DESIRED", "LIVE-REASON", "CONCURRENCY", "QUEUE", "KV-CACHE", "GPU"]
    with_warm = any("warm" in (r.get("live") or {}) for r in table)
    if with_warm:
        headers += ["ASLEEP", "WAKES", "LAST-WAKE"]
    lines = []
    for r in table:
        cells = [_fmt(r.get(k)) for k in keys]
        if with_live:
            live = r.get("live") or {}
            sig = live.get("signals") or {}

            def stable(kind: str, sig: Mapping[str, Any] = sig) -> str:
                got = sig.get(kind) or {}
                return _fmt(got.get("stable"))

            cells += [
                _fmt(live.get("desired")),
                _fmt(live.get("reason")),
                stable("concurrency"),
                stable("queue_depth"),
                stable("kv_cache_utilization"),
                stable("gpu_utilization"),
            ]
        if with_warm:
            warm = (r.get("live") or {}).get("warm") or {}
            last = warm.get("last_wake_s")
            cells += [
                _fmt(warm.get("asleep")),
                _fmt(warm.get("wakes")),
                "-" if last is None else f"{last:.2f}s",
            ]
        lines.append(cells)
    widths = [max(len(h), *(len(c[i]) for c in lines)) for i, h in enumerate(headers)]
    text = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    text += [
        "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        for cells in lines
    ]
    if with_live:
        text += ["", _LEGEND]
    problems = [f"{r['namespace']}/{r['name']}: {r['problem']}" for r in table if r.get("problem")]
    if problems:
        text += ["", "Left alone until fixed:", *problems]
    return "\n".join(text)


async def _live(url: str, timeout_s: float) -> dict[str, Mapping[str, Any]]:
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url.rstrip("/") + "/v1/targets") as resp,
    ):
        resp.raise_for_status()
        body = await resp.json()
    return {t["target"]: t for t in body.get("targets") or () if isinstance(t, dict)}


async def _main(args: argparse.Namespace) -> int:
    access = await connect(kubeconfig=args.kubeconfig, context=args.context)
    try:
        deployments = await list_opted_in(
            access.api,
            namespace=None if args.all_namespaces else args.namespace,
            request_timeout_s=args.timeout_s,
        )
    finally:
        await access.close()
    live = None
    failed = False
    if args.scaler_url:
        try:
            live = await _live(args.scaler_url, args.timeout_s)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            # The API's view is still worth showing; only the live columns go.
            reason = str(exc) or type(exc).__name__
            print(
                f"tidal status: no live values: scaler at {args.scaler_url}: {reason} "
                "(the table shows what the API server holds)",
                file=sys.stderr,
            )
            failed = True
    table = rows(deployments, live)
    if args.output == "json":
        print(json.dumps(table, indent=2))
    elif table:
        print(render_table(table))
    else:
        print("no opted-in Deployments (label autoscaling.tidal.dev/enabled=true)")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_main(args))
    except (KubeConfigError, KubeError) as exc:
        print(f"tidal status: {exc}", file=sys.stderr)
        return 1
