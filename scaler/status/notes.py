"""The lines under ``tidal status``'s table: what a row's columns cannot say.

Spot pairs (both halves and their ready replicas, live the cost and the
saving), GPU shapes (replicas asked of each, their cost, live the shapes
capped), TTFT objectives (the goal, live the capacity learned and the
attainment measured), requests held by priority class across the
activators, and what Tidal does not act on: Deployments left alone for a
bad annotation, routing annotations the activator cannot use, unknown keys,
servers without sleep mode, and labels that opt nothing in; live, the GPU
devices held across the cluster, each whole, by what they do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundwork.rules.priority import PRIORITY_LABELS
from scaler.kube.types import ENABLED_LABEL

__all__ = ["devices_line", "not_opted_in_lines", "problem_lines", "under_table_lines"]


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


def _shapes_line(row: Mapping[str, Any]) -> str:
    shapes = row["shapes"]
    asked = " + ".join(f"{n} x {name}" for name, n in sorted(shapes["replicas"].items()))
    cost = shapes["cost_per_hour"]
    line = f"{row['namespace']}/{row['name']}: {asked or 'none'}"
    if cost is not None:
        line += f", ${cost:.2f}/h"
    ready = ", ".join(f"{name} {n}" for name, n in shapes["ready"].items())
    line += f"; ready: {ready}"
    capped = ((row.get("live") or {}).get("shapes") or {}).get("capped") or {}
    for name, cap in sorted(capped.items()):
        line += f"; {name} capped at {cap['at_most']} (Pending past the pending-timeout)"
    return line


def under_table_lines(table: Sequence[Mapping[str, Any]]) -> list[str]:
    """The spot pairs, the GPU shapes, the TTFT objectives and the requests held by
    class, each under a heading, for the rows that have them."""
    text: list[str] = []
    pairs = [_pair_line(r) for r in table if r.get("pair")]
    if pairs:
        text += ["", "Spot pairs (on-demand + spot Deployments):", *pairs]
    shaped = [_shapes_line(r) for r in table if r.get("shapes")]
    if shaped:
        text += ["", "GPU shapes (replicas asked of each, their on-demand cost):", *shaped]
    slo_lines = [_slo_line(r) for r in table if r.get("slo")]
    if slo_lines:
        text += ["", "Time-to-first-token objectives (SLO-first scaling):", *slo_lines]
    held = [line for r in table for line in [_held_line(r)] if line]
    if held:
        text += ["", "Held by priority class (all activators, live):", *held]
    return text


def problem_lines(table: Sequence[Mapping[str, Any]]) -> list[str]:
    """What Tidal does not act on or cannot do, each under a heading, for the rows that
    have it."""
    text: list[str] = []
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
    return text
