"""The ``POST /v1/stats`` report: what an activator writes and the scaler reads, in one place.

Every activator posts, every period (1 s), what it saw of each target it
knows (docs/architecture.md, "Inside the activator" and "The signal
sources")::

    {"activator": "<pod name or host:pid>", "period_s": 1.0,
     "targets": {"<namespace>/<name>": {
         "concurrency": 3.4,   # time-weighted mean of in_flight + buffered over the period
         "in_flight": 3,       # sent to a replica, not finished, at the end of the period
         "buffered": 1,        # held for a replica, at the end of the period
         "arrivals": 57,       # requests received during the period
         "pods": {"<pod name, else ip:port>": 2},   # in flight per replica
         ...optional counts, below
     }}}

The activator builds :class:`ActivatorReport` values and writes them with
:func:`report_json`; the scaler reads a body with :func:`parse_report`, and
the simulator hands the scaler's hub the same values, so a field exists on
both sides or on neither (a test writes every field and reads it back).

The scaler's answer (:class:`ScalerAnswer`, written with :func:`answer_json`
and read by the activator with :func:`parse_answer`) says how many
activators report to that scaler replica now (the activator's share of
container-concurrency is one over the largest fresh count) and whether it
leads; the leader's answer also lists, per target, the endpoints the warm
tier keeps out of rotation (asleep, going to sleep or waking)::

    {"activators": 2, "leader": true, "sleeping": {"<namespace>/<name>": ["ip:port"]},
     "shapes": {"<namespace>/<name>": {"ip:port": {"shape": "h100", "weight": 1.0,
                                                   "reach": 8000}}}}

``shapes`` (the leader's too) names, for each model on several GPU shapes,
each endpoint's shape, its ``weight`` (what one replica of it takes against
the others) and its ``reach`` (the longest prompt it prefills within the
objective; absent: any), as :class:`ShapeRoute` values.

An activation (``POST /v1/activate``, 202) is answered the same way, with
the ``target`` in place of the count.

Main decisions:

- **Optional counts are written only when they say something**: a field
  at its default (no tokens counted, no priority classes in use, no
  refused adapter load) is left out and read back as that default, so a
  report stays small for the many targets that use none of them and an
  older activator's report still parses.
- **A bad body is refused whole** (:class:`ReportError` names the field,
  what it holds and what is allowed): a report is a snapshot of one
  activator; half of one would read as zero load for the rest.
- **An answer is read for what it can say**: a count that is not a whole
  number of at least one says nothing (the last fresh one stands), and the
  sleeping list and the shapes count only in the leader's answer (a
  follower's knows neither); a bad part of an answer is ignored (a
  malformed endpoint's shape is left out: it is balanced as a new one),
  never the report's fault.
- **Bounded**: at most ``max_targets`` targets, :data:`MAX_ADAPTER_REFUSALS`
  refusals per target each cut to :data:`MAX_REFUSAL_CHARS`, an activator
  name of at most 253 characters (a pod name's limit), a period of 0.05 to
  60 s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS

__all__ = [
    "MAX_ADAPTER_REFUSALS",
    "MAX_REFUSAL_CHARS",
    "ActivatorReport",
    "ReportError",
    "ScalerAnswer",
    "ShapeRoute",
    "TargetStats",
    "answer_json",
    "is_target_key",
    "parse_answer",
    "parse_report",
    "report_json",
]

# A report's refusals per target beyond this are dropped, each cut to this length.
MAX_ADAPTER_REFUSALS = 10
MAX_REFUSAL_CHARS = 500
_MAX_ACTIVATOR_CHARS = 253
_PERIOD_RANGE_S = (0.05, 60.0)


class ReportError(ValueError):
    """A report body that does not have the shape of a report (see :func:`parse_report`)."""


@dataclass(frozen=True, slots=True)
class TargetStats:
    """One activator's counts for one target over one period."""

    concurrency: float  # time-weighted mean of in_flight + buffered
    in_flight: int
    buffered: int
    arrivals: int
    pods: Mapping[str, int] = field(default_factory=dict)  # in-flight per replica
    # Tokens, for SLO-first scaling (written only for a model with a TTFT
    # objective): prompt tokens and max_tokens of the requests that arrived in
    # the period, the requests whose first token came back in it and their
    # prompt tokens, and the requests held or sent with no first token yet at
    # its end.
    prompt_tokens: int = 0
    output_tokens: int = 0
    first_tokens: int = 0
    prefilled_tokens: int = 0
    awaiting_first_token: int = 0
    # The fastest prefill among those first tokens: prompt tokens over the time
    # from reaching a replica to the first token (0: none).
    best_prefill_tokens_per_s: float = 0.0
    # Held requests by priority class at the period's end, and those shed in
    # it (shown by `tidal status`, never acted on).
    held_critical: int = 0
    held_standard: int = 0
    held_sheddable: int = 0
    shed: int = 0
    # LoRA adapter loads replicas refused in the period (each names the replica,
    # the adapter and its answer), for an AdapterLoadRefused Event.
    adapter_refusals: tuple[str, ...] = ()
    # Arrivals in the period with prompts longer than each of PROMPT_SIZE_BOUNDS
    # (empty: not counted).
    prompts_over: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ActivatorReport:
    activator: str
    period_s: float
    targets: Mapping[str, TargetStats]


# The optional whole-number counts of TargetStats, as named in a report.
_COUNTS = (
    "prompt_tokens",
    "output_tokens",
    "first_tokens",
    "prefilled_tokens",
    "awaiting_first_token",
    "held_critical",
    "held_standard",
    "held_sheddable",
    "shed",
)


def is_target_key(key: object) -> bool:
    """``namespace/name``: two non-empty parts (the names' own rules are Kubernetes')."""
    return isinstance(key, str) and key.count("/") == 1 and "" not in key.split("/")


def _target_json(stats: TargetStats) -> dict[str, Any]:
    body: dict[str, Any] = {
        "concurrency": stats.concurrency,
        "in_flight": stats.in_flight,
        "buffered": stats.buffered,
        "arrivals": stats.arrivals,
        "pods": dict(stats.pods),
    }
    for name in _COUNTS:
        if value := getattr(stats, name):
            body[name] = value
    if stats.best_prefill_tokens_per_s:
        body["best_prefill_tokens_per_s"] = stats.best_prefill_tokens_per_s
    if stats.adapter_refusals:
        body["adapter_refusals"] = list(stats.adapter_refusals)
    if stats.prompts_over:
        body["prompts_over"] = list(stats.prompts_over)
    return body


def report_json(report: ActivatorReport) -> dict[str, Any]:
    """The body an activator posts for ``report`` (what :func:`parse_report` reads back)."""
    return {
        "activator": report.activator,
        "period_s": report.period_s,
        "targets": {key: _target_json(stats) for key, stats in report.targets.items()},
    }


def _number(value: object, where: str, *, integer: bool = False) -> float:
    # bool is an int in Python; a JSON true is not a count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ReportError(f"{where}: expected a finite number >= 0, got {value!r}")
    if integer and value != int(value):
        raise ReportError(f"{where}: expected a whole number, got {value!r}")
    return float(value)


def _count(raw: Mapping[str, object], name: str, where: str) -> int:
    return int(_number(raw.get(name, 0), f"{where}.{name}", integer=True))


def _refusals(raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
        raise ReportError(f"{where}: expected a list of strings, got {raw!r}")
    return tuple(r[:MAX_REFUSAL_CHARS] for r in raw[:MAX_ADAPTER_REFUSALS])


def _prompts_over(raw: object, where: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or len(raw) not in (0, len(PROMPT_SIZE_BOUNDS)):
        raise ReportError(
            f"{where}: expected a list of {len(PROMPT_SIZE_BOUNDS)} counts, one per prompt "
            f"size bound {list(PROMPT_SIZE_BOUNDS)}, got {raw!r}"
        )
    return tuple(int(_number(n, f"{where}[{i}]", integer=True)) for i, n in enumerate(raw))


def _target_stats(raw: object, where: str) -> TargetStats:
    if not isinstance(raw, dict):
        raise ReportError(f"{where}: expected an object")
    pods_raw = raw.get("pods", {})
    if not isinstance(pods_raw, dict):
        raise ReportError(f"{where}.pods: expected an object of pod -> in-flight")
    pods = {
        str(pod): int(_number(n, f"{where}.pods[{pod}]", integer=True))
        for pod, n in pods_raw.items()
    }
    return TargetStats(
        concurrency=_number(raw.get("concurrency", 0), f"{where}.concurrency"),
        in_flight=_count(raw, "in_flight", where),
        buffered=_count(raw, "buffered", where),
        arrivals=_count(raw, "arrivals", where),
        pods=pods,
        **{name: _count(raw, name, where) for name in _COUNTS},
        best_prefill_tokens_per_s=_number(
            raw.get("best_prefill_tokens_per_s", 0), f"{where}.best_prefill_tokens_per_s"
        ),
        adapter_refusals=_refusals(raw.get("adapter_refusals"), f"{where}.adapter_refusals"),
        prompts_over=_prompts_over(raw.get("prompts_over", []), f"{where}.prompts_over"),
    )


def parse_report(payload: object, *, max_targets: int = 100_000) -> ActivatorReport:
    """Validate a ``POST /v1/stats`` body; :class:`ReportError` says what is wrong."""
    if not isinstance(payload, dict):
        raise ReportError("body: expected a JSON object")
    activator = payload.get("activator")
    if not isinstance(activator, str) or not activator or len(activator) > _MAX_ACTIVATOR_CHARS:
        raise ReportError(
            f"activator: expected a non-empty name (<= {_MAX_ACTIVATOR_CHARS} chars), "
            f"got {activator!r}"
        )
    period_s = _number(payload.get("period_s", 1.0), "period_s")
    low, high = _PERIOD_RANGE_S
    if not low <= period_s <= high:
        raise ReportError(f"period_s: expected {low:g}..{high:g} seconds, got {period_s!r}")
    raw_targets = payload.get("targets", {})
    if not isinstance(raw_targets, dict):
        raise ReportError("targets: expected an object keyed by 'namespace/name'")
    if len(raw_targets) > max_targets:
        raise ReportError(f"targets: at most {max_targets} per report, got {len(raw_targets)}")
    targets: dict[str, TargetStats] = {}
    for key, raw in raw_targets.items():
        if not is_target_key(key):
            raise ReportError(f"targets: keys must be 'namespace/name', got {key!r}")
        targets[key] = _target_stats(raw, f"targets[{key}]")
    return ActivatorReport(activator=activator, period_s=period_s, targets=targets)


@dataclass(frozen=True, slots=True)
class ShapeRoute:
    """What the scaler says of one endpoint: its shape, weight and reach (None: any)."""

    shape: str
    weight: float
    reach: float | None = None


@dataclass(frozen=True, slots=True)
class ScalerAnswer:
    """A scaler replica's answer to a report or an activation (see the module docstring).

    ``activators``: the activators reporting to it now (in an answer to a
    report); ``target``: the target activated (in an answer to an
    activation); ``sleeping``: the leader's endpoints out of rotation, by
    target (``None``: not the leader's answer, or no warm tier); ``shapes``:
    the leader's word on each GPU-shaped model's endpoints (``None``: none
    said; a leader's answer that says none means no model has shapes).
    """

    leader: bool
    activators: int | None = None
    target: str | None = None
    sleeping: Mapping[str, tuple[str, ...]] | None = None
    shapes: Mapping[str, Mapping[str, ShapeRoute]] | None = None


def answer_json(answer: ScalerAnswer) -> dict[str, Any]:
    """The JSON body of ``answer``."""
    body: dict[str, Any] = {}
    if answer.activators is not None:
        body["activators"] = answer.activators
    if answer.target is not None:
        body["target"] = answer.target
    body["leader"] = answer.leader
    if answer.sleeping is not None:
        body["sleeping"] = {target: list(ends) for target, ends in answer.sleeping.items()}
    if answer.shapes:
        body["shapes"] = {
            target: {key: _route_json(route) for key, route in routes.items()}
            for target, routes in answer.shapes.items()
        }
    return body


def _route_json(route: ShapeRoute) -> dict[str, Any]:
    body: dict[str, Any] = {"shape": route.shape, "weight": route.weight}
    if route.reach is not None:
        body["reach"] = route.reach
    return body


def _route(raw: object) -> ShapeRoute | None:
    """One endpoint's word, read by the report's own number rule; None when malformed
    (a weight of zero included: it would take no request)."""
    if not isinstance(raw, dict) or not isinstance(shape := raw.get("shape"), str):
        return None
    reach = raw.get("reach")
    try:
        weight = _number(raw.get("weight"), "weight")
        limit = None if reach is None else _number(reach, "reach")
    except ReportError:
        return None
    return ShapeRoute(shape, weight, limit) if weight > 0 else None


def _routes(raw: object) -> dict[str, dict[str, ShapeRoute]]:
    """The ``shapes`` of a leader's answer, what is malformed left out."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, dict[str, ShapeRoute]] = {}
    for target, endpoints in raw.items():
        if not isinstance(endpoints, dict):
            continue
        routes = {str(k): r for k, v in endpoints.items() if (r := _route(v)) is not None}
        if routes:
            out[str(target)] = routes
    return out


def parse_answer(payload: object) -> ScalerAnswer:
    """What a scaler's answer says; the parts it cannot say are ``None`` (never an error)."""
    if not isinstance(payload, dict):
        return ScalerAnswer(leader=False)
    count = payload.get("activators")
    activators = count if type(count) is int and count > 0 else None
    target = payload.get("target")
    leader = payload.get("leader") is True
    sleeping = payload.get("sleeping")
    listed = None
    if leader and isinstance(sleeping, dict):
        listed = {
            str(key): tuple(str(e) for e in ends)
            for key, ends in sleeping.items()
            if isinstance(ends, list)
        }
    return ScalerAnswer(
        leader=leader,
        activators=activators,
        target=target if isinstance(target, str) else None,
        sleeping=listed,
        shapes=_routes(payload["shapes"]) if leader and "shapes" in payload else None,
    )
