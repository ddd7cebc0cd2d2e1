"""``tidal status``: what Tidal is doing to each opted-in Deployment.

From the API server: desired and ready replicas, the spot/on-demand split,
mode and last reason (from the ``autoscaling.tidal.dev/status`` annotation,
which holds only discrete state). With ``--scaler-url`` it adds the live
values the scaler serves at ``GET /v1/targets`` (signals move every tick, so
they are never written to the API), and the cost rate and the saving against
all on-demand. The default table fits 100 columns (the name, the replicas,
mode and reasons, and live the concurrency); ``-o wide`` shows every column,
as kubectl's does, and ``-o json`` the same rows as JSON. ``--help`` says
what MODE and each reason mean.
A model with a TTFT objective (``autoscaling.tidal.dev/slo-ttft``) gets a
line under the table: the objective and, live, the capacity the scaler has
learned (prompt tokens per second per replica, or the prior it still uses)
and the attainment measured over the last ten minutes (the servers' TTFT
histograms), so the goal and what was delivered read side by side.
Where requests carry priority classes, a line under the table gives the
requests held by class across the activators and those shed in the last
report (docs/priority.md).
With the warm tier in use (``autoscaling.tidal.dev/sleep-after``), the live
view also shows how many replicas sleep, the wakes so far and the last wake's
duration.

Two reasons, said apart: REASON is why the scale *last changed* (from the
status annotation, written only at a change), LIVE-REASON what the scaler
says *now* (``GET /v1/targets``); they differ whenever the scaler holds a
scale for another reason than the one that set it. The table says so under
itself when it shows both.

A Deployment an opted-in InferencePool scales is listed too (POOL names the
pool), and a line per pool under the table says what it scales or why not
(:mod:`scaler.status.pools`).

A model with a spot placement policy is a pair of Deployments: the user's
(the on-demand share) and ``<name>-spot`` (the spot share). Its READY is the
pair's, and a line under the table names both halves with their ready
replicas (and, live, the cost), so the pair is obvious.

Under the table, lines name what Tidal does not act on or cannot do:
Deployments left alone for an invalid annotation, routing annotations the
activator cannot use (it routes with the defaults), annotation keys of ours
that Tidal does not know (ignored, with the closest known key), a warm tier whose server
has no sleep mode, and Deployments whose opt-in label has a value other than
``true`` (``enabled: "yes"`` opts nothing in; it would otherwise be silent).
Output cut short by its reader (``tidal status | head``) ends quietly.

An unreachable scaler costs only the live columns: the table from the API
is still printed (with the error on stderr and exit status 1). A
``--scaler-url`` without a scheme is refused with the form to use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from groundwork.kube.connection import KubeConfigError, connect
from groundwork.kube.errors import KubeError
from groundwork.rules.priority import PRIORITY_LABELS
from scaler.kube.listing import list_companions, list_not_opted_in, list_opted_in, list_pools
from scaler.kube.types import (
    ENABLED_LABEL,
    STATUS_ANNOTATION,
    CompanionInfo,
    DeploymentInfo,
    PoolInfo,
)
from scaler.policy.annotations import InvalidAnnotation, parse_scaling_config, unknown_keys
from scaler.policy.placement.companion import companion_name
from scaler.policy.pool_annotations import merge
from scaler.policy.routing_check import routing_problems
from scaler.status.pools import pool_lines, pool_rows

__all__ = ["HELP_LEGEND", "configure", "devices_line", "render_table", "rows", "run"]


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


_LEGEND = (
    "REASON: why the scale last changed (status annotation); "
    "LIVE-REASON: what the scaler says now (GET /v1/targets). "
    "MODE panic beside LIVE-REASON Steady is usual: in panic the scale is never lowered, "
    "so it stays where the burst put it."
)
_NARROW_LEGEND = " -o wide shows every column."
# What a "-" means in the columns only -o wide shows.
_WIDE_LEGEND = (
    "QUEUE, KV-CACHE and GPU: the stable window's average of a signal the model scales on. "
    "'-' there: the model does not scale on it (no autoscaling.tidal.dev/target-queue-depth, "
    "target-kv-cache-utilization or target-gpu-utilization annotation), or no sample has "
    "arrived yet (GPU comes from DCGM through the scaler's --prometheus-url, or from Triton "
    "itself). '-' elsewhere: not known yet, or not in use (ON-DEMAND and SPOT without a spot "
    "placement)."
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
    deployments: Sequence[DeploymentInfo],
    live: Mapping[str, Mapping[str, Any]] | None = None,
    companions: Mapping[str, CompanionInfo] | None = None,
    pools: Mapping[str, PoolInfo] | None = None,
) -> list[dict[str, Any]]:
    """One row per Deployment: API state, plus live values when ``live`` is given.

    ``companions`` (by ``namespace/name`` of the user's Deployment) adds the
    spot half of a pair to READY and to the row's ``pair``; ``pools`` (by the
    same key) names the InferencePool that scales it, whose annotations are
    read under the Deployment's, as the scaler reads them.
    """
    out = []
    for d in deployments:
        pool = (pools or {}).get(d.key)
        if pool is not None:
            d = replace(d, annotations=merge(pool.annotations, d.annotations).annotations)
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
        if pool is not None:
            row["pool"] = pool.name
        # The scaler leaves a Deployment with a bad annotation alone, so its
        # status annotation goes stale: say why here, from the same parser.
        try:
            config = parse_scaling_config(d.annotations)
        except InvalidAnnotation as exc:
            row["reason"] = "InvalidAnnotation"
            row["problem"] = str(exc)
            policy = "on-demand"
        else:
            policy = config.placement.policy
            if config.slo_ttft_s is not None:
                row["slo"] = {"ttft_s": config.slo_ttft_s, "attainment": config.slo_attainment}
        routing = routing_problems(d.annotations)
        if routing:
            row["routing_problem"] = "; ".join(str(p) for p in routing)
        unknown = unknown_keys(d.annotations)
        if unknown:
            row["unknown_keys"] = "; ".join(str(p) for p in unknown)
        companion = (companions or {}).get(d.key)
        if policy != "on-demand" or companion is not None:
            spot_ready = companion.ready_replicas if companion is not None else 0
            row["ready"] = d.ready_replicas + spot_ready
            row["pair"] = {
                "policy": policy,
                "on_demand": {"deployment": d.name, "ready": d.ready_replicas},
                "spot": {
                    "deployment": companion.name if companion else companion_name(d.name),
                    "exists": companion is not None,
                    "ready": spot_ready,
                },
            }
        if live is not None:
            view = live.get(d.key) or {}
            signals = view.get("signals") or {}
            row["live"] = {
                "desired": view.get("desired"),
                "mode": view.get("mode"),
                "reason": view.get("reason"),
                "signals": signals,
                "observed": view.get("observed") or {},
                "cost": view.get("cost"),
            }
            slo = view.get("slo")
            if isinstance(slo, Mapping):
                row["live"]["slo"] = dict(slo)
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
                    "sleep_mode_unavailable": warm.get("sleepModeUnavailable"),
                }
        out.append(row)
    return out


def _spot_policy(d: DeploymentInfo) -> bool:
    try:
        return parse_scaling_config(d.annotations).placement.policy != "on-demand"
    except InvalidAnnotation:
        return False


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _wide_columns(table: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Every column (``-o wide``): the status annotation's, the live ones, the warm tier's."""
    headers = ["NAMESPACE", "NAME", "DESIRED", "READY", "ON-DEMAND", "SPOT", "MODE", "REASON"]
    keys = ["namespace", "name", "desired", "ready", "on_demand", "spot", "mode", "reason"]
    if any(r.get("pool") for r in table):
        headers.insert(2, "POOL")
        keys.insert(2, "pool")
    with_live = any("live" in r for r in table)
    if with_live:
        headers += [
            "LIVE-DESIRED",
            "LIVE-REASON",
            "CONCURRENCY",
            "QUEUE",
            "KV-CACHE",
            "GPU",
            "$/H",
            "SAVED-$/H",
        ]
    with_warm = any("warm" in (r.get("live") or {}) for r in table)
    if with_warm:
        headers += ["ASLEEP", "WAKES", "LAST-WAKE"]
    lines = []
    for r in table:
        cells = [_fmt(r.get(k)) for k in keys]
        live = r.get("live") or {}
        if with_live:
            cost = live.get("cost") or {}
            cells += [
                _fmt(live.get("desired")),
                _fmt(live.get("reason")),
                _stable(live, "concurrency"),
                _stable(live, "queue_depth"),
                _stable(live, "kv_cache_utilization"),
                _stable(live, "gpu_utilization"),
                _fmt(cost.get("dollars_per_hour")),
                _fmt(cost.get("saving_dollars_per_hour")),
            ]
        if with_warm:
            warm = live.get("warm") or {}
            last = warm.get("last_wake_s")
            cells += [
                _fmt(warm.get("asleep")),
                _fmt(warm.get("wakes")),
                "-" if last is None else f"{last:.2f}s",
            ]
        lines.append(cells)
    return headers, lines


def _narrow_columns(table: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The default columns, within 100 characters for names of a usual length: with live
    values, DESIRED and MODE are the scaler's now, and the one signal every model has."""
    headers = ["NAMESPACE", "NAME", "DESIRED", "READY", "MODE", "REASON"]
    with_pool = any(r.get("pool") for r in table)
    if with_pool:
        headers.insert(2, "POOL")
    with_live = any("live" in r for r in table)
    if with_live:
        headers += ["LIVE-REASON", "CONCURRENCY"]
    with_warm = any("warm" in (r.get("live") or {}) for r in table)
    if with_warm:
        headers += ["ASLEEP"]
    lines = []
    for r in table:
        live = r.get("live") or {}
        desired = live.get("desired", r.get("desired")) if with_live else r.get("desired")
        mode = (live.get("mode") or r.get("mode")) if with_live else r.get("mode")
        cells = [_fmt(v) for v in (r.get("namespace"), r.get("name"), desired, r.get("ready"))]
        if with_pool:
            cells.insert(2, _fmt(r.get("pool")))
        cells += [_fmt(mode), _fmt(r.get("reason"))]
        if with_live:
            cells += [_fmt(live.get("reason")), _stable(live, "concurrency")]
        if with_warm:
            cells += [_fmt((live.get("warm") or {}).get("asleep"))]
        lines.append(cells)
    return headers, lines


def _stable(live: Mapping[str, Any], kind: str) -> str:
    got = (live.get("signals") or {}).get(kind) or {}
    return _fmt(got.get("stable"))


def render_table(
    table: Sequence[Mapping[str, Any]],
    *,
    wide: bool = False,
    pools: list[dict[str, Any]] | None = None,
) -> str:
    """The table (``wide``: every column, as ``-o wide``), then the lines under it
    (``pools``: the opted-in InferencePools' rows, :func:`scaler.status.pools.pool_rows`)."""
    if not table:
        return "\n".join(pool_lines(pools or [])[1:])
    headers, lines = _wide_columns(table) if wide else _narrow_columns(table)
    with_live = any("live" in r for r in table)
    widths = [max(len(h), *(len(c[i]) for c in lines)) for i, h in enumerate(headers)]
    text = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    text += [
        "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        for cells in lines
    ]
    text += pool_lines(pools or [])
    pairs = [_pair_line(r) for r in table if r.get("pair")]
    if pairs:
        text += ["", "Spot pairs (on-demand + spot Deployments):", *pairs]
    slo_lines = [_slo_line(r) for r in table if r.get("slo")]
    if slo_lines:
        text += ["", "Time-to-first-token objectives (SLO-first scaling):", *slo_lines]
    held = [line for r in table for line in [_held_line(r)] if line]
    if held:
        text += ["", "Held by priority class (all activators, live):", *held]
    if with_live:
        text += ["", *textwrap.wrap(_LEGEND + ("" if wide else _NARROW_LEGEND), 100)]
        if wide:
            text += textwrap.wrap(_WIDE_LEGEND, 100)
    problems = [f"{r['namespace']}/{r['name']}: {r['problem']}" for r in table if r.get("problem")]
    if problems:
        text += ["", "Left alone until fixed:", *problems]
    routing = [
        f"{r['namespace']}/{r['name']}: {r['routing_problem']}"
        for r in table
        if r.get("routing_problem")
    ]
    if routing:
        text += ["", "Routing annotations the activator cannot use (it uses the defaults):"]
        text += routing
    unknown = [
        f"{r['namespace']}/{r['name']}: {r['unknown_keys']}" for r in table if r.get("unknown_keys")
    ]
    if unknown:
        text += ["", "Annotation keys Tidal does not know (ignored; scaling goes on):", *unknown]
    asleep = [
        f"{r['namespace']}/{r['name']}: {w['sleep_mode_unavailable']}"
        for r in table
        for w in [(r.get("live") or {}).get("warm") or {}]
        if w.get("sleep_mode_unavailable")
    ]
    if asleep:
        text += ["", "Sleep mode unavailable (replicas stay awake):", *asleep]
    return "\n".join(text)


def not_opted_in_lines(labelled: Sequence[tuple[str, str]]) -> list[str]:
    """Lines for Deployments whose opt-in label has a value that opts nothing in."""
    if not labelled:
        return []
    return [
        "",
        f'Not opted in: the label {ENABLED_LABEL} must be "true"; Tidal leaves these alone:',
        *(f'{key}: {ENABLED_LABEL}="{value}"' for key, value in labelled),
    ]


def _percent(share: float) -> str:
    return f"{100 * share:.2f}".rstrip("0").rstrip(".") + " %"


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _slo_line(row: Mapping[str, Any]) -> str:
    """The objective, and live what the scaler learned and measured for it."""
    goal = row["slo"]
    ttft = _seconds(goal["ttft_s"])
    line = f"{row['namespace']}/{row['name']}: goal {_percent(goal['attainment'])} within {ttft}"
    if "live" not in row:
        return line
    live = (row.get("live") or {}).get("slo")
    if not live:
        return line + "; nothing learned yet (no SLO decision at the scaler)"
    learned = "learned" if live.get("capacity_learned") else "prior, not yet learned"
    line += (
        f"; capacity {live.get('capacity_prompt_tokens_per_s', 0):,.0f} prompt tokens/s"
        f" and {live.get('capacity_decode_tokens_per_s', 0):,.0f} generated tokens/s"
        f" ({live.get('decode_slots', 0):,.0f} sequences) per replica ({learned});"
        f" {live.get('binding', 'prefill')} binds"
    )
    hopeless = live.get("hopeless_share") or 0.0
    if hopeless > 0:
        line += f"; {_percent(hopeless)} of requests have prompts no replica prefills in {ttft}"
    line += _next_replica(live)
    headroom = live.get("headroom") or 1.0
    if headroom > 1.0:
        line += f"; headroom x{headroom:.2f} (measured under the goal the sizing promised)"
    measured = live.get("measured_attainment")
    if measured is None:
        return line + "; measured: no first token counted in the last 10m"
    return line + (
        f"; measured {_percent(measured)} within {ttft} over the last 10m"
        f" ({live.get('measured_first_tokens', 0):,.0f} first tokens, servers' TTFT histograms)"
    )


def _next_replica(live: Mapping[str, Any]) -> str:
    """Where the count stopped and what one more replica would buy."""
    more = f"one more replica would meet {_percent(live.get('next_replica') or 0.0)} more"
    if live.get("reachable") is False:
        return f"; goal out of reach: sized where {more}, less than it costs"
    goal = live.get("goal_replicas") or 0
    if goal:
        return f"; the goal takes {goal} replicas: sized short of it, where {more}"
    return f"; {more}"


def _held_line(row: Mapping[str, Any]) -> str:
    """Held requests by class and those shed in the last report, when classes are in use
    (anything held outside ``standard``, or anything shed); else empty."""
    observed = (row.get("live") or {}).get("observed") or {}
    counts = {label: int(observed.get(f"activator_held_{label}") or 0) for label in PRIORITY_LABELS}
    shed = int(observed.get("activator_shed") or 0)
    if not (counts["critical"] or counts["sheddable"] or shed):
        return ""
    held = ", ".join(f"{label} {n}" for label, n in counts.items())
    return f"{row['namespace']}/{row['name']}: held {held}; shed {shed} in the last report"


def _pair_line(row: Mapping[str, Any]) -> str:
    pair = row["pair"]
    od, spot = pair["on_demand"], pair["spot"]
    spot_text = f"{spot['deployment']} {spot['ready']} ready"
    if not spot["exists"]:
        spot_text = f"{spot['deployment']} (not created yet)"
    line = (
        f"{row['namespace']}/{row['name']}: {pair['policy']}: on-demand {od['deployment']} "
        f"{od['ready']} ready, spot {spot_text}"
    )
    cost = (row.get("live") or {}).get("cost")
    if cost:
        saving = cost["saving_dollars_per_hour"]
        # Negative while on-demand cover stands in for spot replicas still starting.
        against = (
            f"saving ${saving:.2f}/h" if saving >= 0 else f"${-saving:.2f}/h more (on-demand cover)"
        )
        line += (
            f"; ${cost['dollars_per_hour']:.2f}/h, {against} against all on-demand for the"
            f" replicas wanted (${cost['saved_dollars']:.2f} saved so far)"
        )
    return line


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


def devices_line(devices: Mapping[str, Any] | None) -> list[str]:
    """The cost line of the whole cluster: the GPUs (and MIG instances) held, each whole
    however many pods share it, by what they do, and their hours so far; [] unknown."""
    if not devices:
        return []
    hours = devices.get("gpu_seconds") or {}

    def h(use: str) -> str:
        return f"{float(hours.get(use) or 0.0) / 3600:.2f}"

    return [
        "",
        "GPU devices (each GPU or MIG instance whole, however many pods share it):",
        f"{devices.get('held', 0)} held: {devices.get('serving', 0)} serving, "
        f"{devices.get('starting', 0)} starting, {devices.get('sleeping_only', 0)} "
        f"sleeping-only (sleepers alone: paid for nothing); GPU-hours since the scaler "
        f"started: {h('serving')} serving, {h('starting')} starting, "
        f"{h('sleeping_only')} sleeping-only",
    ]


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
        if any(_spot_policy(d) for d in deployments):
            companions = await list_companions(
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
    table = rows(deployments, live, companions, {k: p for k, (_, p) in bound.items()})
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
