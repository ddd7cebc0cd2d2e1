"""Parse and validate a Deployment's annotations into a :class:`ScalingConfig`.

``parse_scaling_config(annotations)`` reads every ``autoscaling.tidal.dev/*``
and ``placement.tidal.dev/*`` key, applies the defaults of the table in
``docs/annotations.md``, and checks each value and the cross-field rules (min <= max,
initial <= max, baseline <= max, overprovision <= max). It raises one
:class:`InvalidAnnotation` that lists **every** problem, so the controller's
``InvalidAnnotation`` Event names each bad key at once and the user fixes them
in one round.

Main decisions:

- **A typo in a key warns; a bad value refuses.** An unknown
  ``autoscaling.tidal.dev/*`` or ``placement.tidal.dev/*`` key
  (:func:`unknown_keys`) is named with the closest known key ("did you mean
  ``max-scale``?", by difflib's ratio) and ignored: it cannot make a
  scale unsafe, and refusing the whole Deployment for it would answer every
  request at zero with a 503. A bad *value* of a known key still rejects
  the config: the user asked for something Tidal cannot honour.
  ``autoscaling.tidal.dev/status`` (written by Tidal),
  ``autoscaling.tidal.dev/enabled`` (the opt-in label, sometimes copied into
  annotations) and ``placement.tidal.dev/on-demand-pin`` (written by Tidal
  when it pins the Deployment to on-demand capacity) are known.
  ``routing.tidal.dev/*`` belongs to the activator and is ignored here.
- ``scale-to-zero-grace-period: adaptive`` sets ``scale_to_zero_grace_adaptive``
  and keeps the 5-minute default as the fallback while the idle history is
  short (:mod:`scaler.policy.idle.adaptive`).
- **A signal that can never arrive is an error**: the KV-cache target needs
  ``engine: vllm`` (only vLLM exports it); otherwise that signal would be
  missing forever and, since missing data never lowers the scale, the model
  would never scale down. Likewise the GPU target needs GPU metrics, which
  depend on the scaler's setup as well: :func:`check_supported` checks a
  parsed config against it (Triton exports GPU utilization, any engine has it
  when the scaler queries a Prometheus).
- Durations are Go-style (``500ms``, ``90s``, ``5m``, ``1h30m``; a bare ``0``
  too); percentages are 0-100 and become fractions.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from scaler.policy.api import PlacementConfig, ScalingConfig

__all__ = [
    "ANNOTATIONS_PAGE",
    "AUTOSCALING_PREFIX",
    "KNOWN_KEYS",
    "PLACEMENT_PREFIX",
    "SPECS",
    "STATUS_ANNOTATION",
    "AnnotationProblem",
    "AnnotationSpec",
    "InvalidAnnotation",
    "check_supported",
    "did_you_mean",
    "parse_duration_s",
    "parse_scaling_config",
    "unknown_key_problem",
    "unknown_keys",
]

AUTOSCALING_PREFIX = "autoscaling.tidal.dev/"
PLACEMENT_PREFIX = "placement.tidal.dev/"
STATUS_ANNOTATION = AUTOSCALING_PREFIX + "status"
#: The reference page that lists every key, named in the message of an unknown one.
ANNOTATIONS_PAGE = "docs/annotations.md"
_ENABLED = AUTOSCALING_PREFIX + "enabled"

_A = AUTOSCALING_PREFIX
_P = PLACEMENT_PREFIX
MIN_SCALE = _A + "min-scale"
MAX_SCALE = _A + "max-scale"
INITIAL_SCALE = _A + "initial-scale"
ENGINE = _A + "engine"
TARGET_CONCURRENCY = _A + "target-concurrency"
TARGET_QUEUE_DEPTH = _A + "target-queue-depth"
TARGET_KV_CACHE = _A + "target-kv-cache-utilization"
TARGET_GPU = _A + "target-gpu-utilization"
WINDOW = _A + "window"
PANIC_WINDOW_PCT = _A + "panic-window-percentage"
PANIC_THRESHOLD_PCT = _A + "panic-threshold-percentage"
SCALE_DOWN_DELAY = _A + "scale-down-delay"
MAX_SCALE_UP_RATE = _A + "max-scale-up-rate"
MAX_SCALE_DOWN_RATE = _A + "max-scale-down-rate"
GRACE_PERIOD = _A + "scale-to-zero-grace-period"
METRICS_PORT = _A + "metrics-port"
PLACEMENT_POLICY = _P + "policy"
ON_DEMAND_BASELINE = _P + "on-demand-baseline"
FALLBACK = _P + "fallback"
SPOT_OVERPROVISION = _P + "spot-overprovision"
PENDING_TIMEOUT = _P + "pending-timeout"
SLEEP_AFTER = _A + "sleep-after"
SLEEP_LEVEL = _A + "sleep-level"
SLO_TTFT = _A + "slo-ttft"
SLO_ATTAINMENT = _A + "slo-attainment"
ADAPTER_KEEP_ALIVE = _A + "adapter-keep-alive"
SLO_TPOT = _A + "slo-tpot"


@dataclass(frozen=True, slots=True)
class AnnotationSpec:
    """One annotation as a user sees it: the row of ``docs/annotations.md``.

    ``default`` is the annotation text that gives the parser's default (empty:
    unset means "not used"); a unit test parses each one and checks it gives
    the same config as no annotation at all, so the table cannot drift from
    the parser.
    """

    key: str
    default: str
    allowed: str
    meaning: str


#: Every key this module reads, in the order of the reference page
#: docs/annotations.md, which is generated from it.
SPECS: tuple[AnnotationSpec, ...] = (
    AnnotationSpec(MIN_SCALE, "0", "0 to max-scale", "fewest replicas"),
    AnnotationSpec(MAX_SCALE, "10", "1 to 1000", "most replicas"),
    AnnotationSpec(INITIAL_SCALE, "1", "1 to max-scale", "replicas to wake to from zero"),
    AnnotationSpec(
        ENGINE, "vllm", "`vllm`, `triton`, `generic`", "which model-server metrics to read"
    ),
    AnnotationSpec(
        TARGET_CONCURRENCY,
        "16",
        "a number > 0",
        "concurrency per replica: requests in flight plus held, the larger of what the"
        " activators and the servers (running + waiting) see",
    ),
    AnnotationSpec(
        TARGET_QUEUE_DEPTH,
        "",
        "a number > 0",
        "queue depth per replica: requests held by the activators plus waiting on the servers",
    ),
    AnnotationSpec(
        TARGET_KV_CACHE,
        "",
        "1 to 100 (percent); only with engine `vllm`",
        "vLLM KV-cache usage per replica",
    ),
    AnnotationSpec(
        TARGET_GPU, "", "1 to 100 (percent)", "GPU utilization per replica, from DCGM or Triton"
    ),
    AnnotationSpec(WINDOW, "60s", "6s to 1h", "stable averaging window"),
    AnnotationSpec(
        PANIC_WINDOW_PCT,
        "10",
        "1 to 100",
        "panic window as a share of the stable window (at least 1 s)",
    ),
    AnnotationSpec(
        PANIC_THRESHOLD_PCT,
        "200",
        "110 to 1000",
        "enter panic mode (scale up at once, never down) when desired/ready reaches"
        " this percentage",
    ),
    AnnotationSpec(
        SCALE_DOWN_DELAY,
        "60s",
        "0s to 1h",
        "hold the highest recent decision this long before going down",
    ),
    AnnotationSpec(
        MAX_SCALE_UP_RATE, "1000", "a number > 1", "per decision, desired <= rate x max(ready, 1)"
    ),
    AnnotationSpec(
        MAX_SCALE_DOWN_RATE, "2", "a number > 1", "per decision, desired >= ready / rate"
    ),
    AnnotationSpec(
        GRACE_PERIOD,
        "5m",
        "0s to 24h, or `adaptive`",
        "idle time (no request held or in flight anywhere) before going to zero;"
        " `adaptive` learns each model's idle times and keeps it warm while the next"
        " request is likely (fixed 5m while its history is short)",
    ),
    AnnotationSpec(
        METRICS_PORT,
        "8000",
        "a port number 1 to 65535 or a container port name",
        "port of the pods' `/metrics`",
    ),
    AnnotationSpec(
        PLACEMENT_POLICY,
        "on-demand",
        "`on-demand`, `spot`, `spot-with-on-demand-baseline`",
        "capacity types used",
    ),
    AnnotationSpec(
        ON_DEMAND_BASELINE,
        "1",
        "0 to max-scale",
        "on-demand replicas kept while scaled above zero",
    ),
    AnnotationSpec(
        FALLBACK,
        "dynamic",
        "`dynamic`, `none`",
        "`dynamic`: on-demand replicas cover spot ones that are not ready",
    ),
    AnnotationSpec(
        SPOT_OVERPROVISION, "0", "0 to max-scale", "extra spot replicas above the target"
    ),
    AnnotationSpec(
        PENDING_TIMEOUT,
        "3m",
        "10s to 1h",
        "a spot replica pending this long counts as unavailable",
    ),
    AnnotationSpec(
        SLEEP_AFTER,
        "",
        "1s to 24h, shorter than the grace period when min-scale is 0; only with engine `vllm`",
        "warm tier: idle this long, the replicas sleep (vLLM sleep mode) and wake in about a"
        " second; unset: off (docs/warm-tier.md)",
    ),
    AnnotationSpec(
        SLEEP_LEVEL,
        "1",
        "`1`, `2`",
        "vLLM sleep level: 1 keeps the weights in host RAM (fastest wake), 2 drops them",
    ),
    AnnotationSpec(
        SLO_TTFT,
        "",
        "100ms to 10m",
        "SLO-first scaling: the time-to-first-token objective. Set, Tidal sizes the model for"
        " the work of both phases (prompt tokens to prefill, tokens to generate) against the"
        " capacity it learns per replica from the servers' counters, for the load expected"
        " over the next cold start, and keeps it warm while a request within a cold start is"
        " likely enough; prompts whose prefill alone exceeds it buy no replica."
        " target-concurrency, window, panic and scale-down-delay are then not used (the other"
        " targets, when set, still raise the count)",
    ),
    AnnotationSpec(
        SLO_ATTAINMENT,
        "99",
        "50 to 99.99 (percent); only with slo-ttft",
        "the share of requests that must meet slo-ttft",
    ),
    AnnotationSpec(
        SLO_TPOT,
        "",
        "1ms to 10s; only with slo-ttft",
        "the inter-token objective: each sequence's tokens at most this far apart on"
        " average, so a replica runs no more sequences at once than keep its steps"
        " within it; unset: a replica's full batch, and decode must only never queue",
    ),
    AnnotationSpec(
        ADAPTER_KEEP_ALIVE,
        "10m",
        "1s to 24h",
        "a LoRA adapter idle this long is unloaded from its replica by the activator"
        " ([adapters](adapters.md))",
    ),
)

#: Every key this module reads.
KNOWN_KEYS: tuple[str, ...] = tuple(spec.key for spec in SPECS)
_T = TypeVar("_T")

# Written by Tidal: the status, and the record of the on-demand pin (policy.companion).
_ALLOWED_UNREAD = frozenset({STATUS_ANNOTATION, _ENABLED, _P + "on-demand-pin"})

ENGINES = ("vllm", "triton", "generic")
PLACEMENT_POLICIES = ("on-demand", "spot", "spot-with-on-demand-baseline")
FALLBACKS = ("dynamic", "none")


@dataclass(frozen=True, slots=True)
class AnnotationProblem:
    """One bad annotation: its key, its value, and what is allowed."""

    key: str
    value: str
    allowed: str
    unsupported: bool = False  # a valid value this build cannot act on
    unknown: bool = False  # the key itself is not known: ``allowed`` says what to do

    def __str__(self) -> str:
        if self.unknown:
            return f'{self.key}: "{self.value}" {self.allowed}'
        verdict = "is not supported yet" if self.unsupported else "is not allowed"
        return f'{self.key}: "{self.value}" {verdict}; allowed: {self.allowed}'


class InvalidAnnotation(ValueError):
    """One or more annotations are invalid; the message names each key, value and what is allowed.

    ``InvalidAnnotation(key, value, allowed)`` builds one with a single
    problem; :meth:`from_problems` one with several. ``key``, ``value`` and
    ``allowed`` are those of the first problem; ``problems`` holds them all.
    """

    problems: tuple[AnnotationProblem, ...]

    def __init__(
        self,
        key: str,
        value: str,
        allowed: str,
        *,
        unsupported: bool = False,
        more: tuple[AnnotationProblem, ...] = (),
    ) -> None:
        self.problems = (AnnotationProblem(key, value, allowed, unsupported), *more)
        super().__init__("; ".join(str(p) for p in self.problems))

    @classmethod
    def from_problems(cls, problems: tuple[AnnotationProblem, ...]) -> InvalidAnnotation:
        if not problems:
            raise ValueError("InvalidAnnotation needs at least one problem")
        first, *more = problems
        return cls(
            first.key,
            first.value,
            first.allowed,
            unsupported=first.unsupported,
            more=tuple(more),
        )

    @property
    def key(self) -> str:
        return self.problems[0].key

    @property
    def value(self) -> str:
        return self.problems[0].value

    @property
    def allowed(self) -> str:
        return self.problems[0].allowed

    @property
    def keys(self) -> tuple[str, ...]:
        """Every bad key, in the order found."""
        return tuple(p.key for p in self.problems)


# --- value parsers: each returns the value or raises _Bad -----------------------


class _Bad(Exception):
    """A value that does not parse; the caller turns it into an AnnotationProblem."""


_DURATION_UNITS_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration_s(text: str) -> float:
    """Seconds in a Go duration string (``90s``, ``5m``, ``1h30m``, ``500ms``, ``0``).

    Raises ``ValueError`` for anything else, negative durations included.
    """
    value = text.strip()
    if value == "0":
        return 0.0
    if not value:
        raise ValueError("empty duration")
    total = 0.0
    pos = 0
    while pos < len(value):
        match = _DURATION_PART.match(value, pos)
        if match is None:
            raise ValueError(f"not a duration: {text!r}")
        total += float(match.group(1)) * _DURATION_UNITS_S[match.group(2)]
        pos = match.end()
    return total


def _integer(text: str) -> int:
    value = text.strip()
    if not re.fullmatch(r"\+?\d+", value):
        raise _Bad
    return int(value)


def _number(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise _Bad from None
    if not math.isfinite(value):
        raise _Bad
    return value


def _duration(text: str) -> float:
    try:
        return parse_duration_s(text)
    except ValueError:
        raise _Bad from None


_PORT_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?")


def _port(text: str) -> int | str:
    value = text.strip()
    if value.isdigit():
        number = int(value)
        if 1 <= number <= 65535:
            return number
        raise _Bad
    # An IANA service name, as a container port's name: at most 15 characters,
    # lowercase letters, digits and inner single hyphens, at least one letter.
    if _PORT_NAME.fullmatch(value) and "--" not in value and re.search(r"[a-z]", value):
        return value
    raise _Bad


def _fmt_duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


class _Reader:
    """Reads annotations one key at a time, collecting problems instead of stopping."""

    def __init__(self, annotations: Mapping[str, str]) -> None:
        self.annotations = annotations
        self.problems: list[AnnotationProblem] = []

    def bad(self, key: str, allowed: str, *, unsupported: bool = False) -> None:
        self.problems.append(
            AnnotationProblem(key, self.annotations.get(key, ""), allowed, unsupported)
        )

    def get(self, key: str, parse: Callable[[str], _T], allowed: str) -> _T | None:
        """The parsed value, ``None`` when unset or bad (a bad one is recorded)."""
        text = self.annotations.get(key)
        if text is None:
            return None
        try:
            return parse(text)
        except _Bad:
            self.bad(key, allowed)
            return None

    def int_in(self, key: str, low: int, high: int, default: int, allowed: str) -> int:
        value = self.get(key, _integer, allowed)
        if value is None:
            return default
        if not low <= value <= high:
            self.bad(key, allowed)
            return default
        return value

    def optional_number(
        self, key: str, *, allowed: str, check: Callable[[float], bool]
    ) -> float | None:
        """A number, ``None`` when unset (or bad: recorded)."""
        value = self.get(key, _number, allowed)
        if value is not None and not check(value):
            self.bad(key, allowed)
            return None
        return value

    def number(
        self, key: str, *, default: float, allowed: str, check: Callable[[float], bool]
    ) -> float:
        value = self.optional_number(key, allowed=allowed, check=check)
        return default if value is None else value

    def duration(
        self, key: str, low_s: float, high_s: float, default_s: float, *, also: str = ""
    ) -> float:
        allowed = (
            f"a duration from {_fmt_duration(low_s)} to {_fmt_duration(high_s)} "
            f"(Go style, such as 90s, 5m, 1h30m){also}"
        )
        value = self.get(key, _duration, allowed)
        if value is None:
            return default_s
        if not low_s <= value <= high_s:
            self.bad(key, allowed)
            return default_s
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        allowed = "one of " + ", ".join(choices)
        value = self.get(key, lambda text: text.strip(), allowed)
        if value is None:
            return default
        if value not in choices:
            self.bad(key, allowed)
            return default
        return value


def did_you_mean(key: str, known: Sequence[str]) -> str:
    """`` (did you mean K?)`` for the known key closest to ``key``, or ``""`` when none is close.

    Closeness is difflib's ratio over the names after the prefix (the shared
    prefix would make every key look close), with the cut-off of
    ``difflib.get_close_matches``: ``max-scal`` finds ``max-scale``,
    ``placement.tidal.dev/baseline`` finds ``on-demand-baseline``,
    ``autoscaling.tidal.dev/policy`` finds ``placement.tidal.dev/policy``.
    """
    by_name = {k.rpartition("/")[2]: k for k in reversed(known)}
    close = difflib.get_close_matches(key.rpartition("/")[2], list(by_name), n=1, cutoff=0.6)
    return f" (did you mean {by_name[close[0]]}?)" if close else ""


def unknown_key_problem(key: str, value: str, known: Sequence[str], page: str) -> AnnotationProblem:
    """The problem of ``key``, under one of our prefixes but not in ``known``.

    The message names the closest known key and points at the reference page
    ``page`` rather than listing every key: an Event message holds 1,024 bytes
    and the list alone is longer.
    """
    return AnnotationProblem(
        key,
        value,
        f"is not a known key, ignored{did_you_mean(key, known)}; every key: {page}",
        unknown=True,
    )


def unknown_keys(annotations: Mapping[str, str]) -> tuple[AnnotationProblem, ...]:
    """Every ``autoscaling.tidal.dev/*`` or ``placement.tidal.dev/*`` key this module does not
    read, each with the closest known key. They are warnings: scaling goes on with the keys
    that are known (:func:`parse_scaling_config` ignores these)."""
    known = frozenset(KNOWN_KEYS)
    return tuple(
        unknown_key_problem(key, value, KNOWN_KEYS, ANNOTATIONS_PAGE)
        for key, value in annotations.items()
        if key.startswith((AUTOSCALING_PREFIX, PLACEMENT_PREFIX))
        and key not in known
        and key not in _ALLOWED_UNREAD
    )


@dataclass(frozen=True, slots=True)
class _Scale:
    min_scale: int
    max_scale: int
    initial_scale: int
    limit: int  # max-scale, or 1000 when max-scale is itself bad
    note: str  # "max-scale (N)", for the messages of the checks against it


def _read_scale(r: _Reader) -> _Scale:
    # max-scale first: several ranges depend on it. A bad one falls back to
    # the default only for those checks (it is reported anyway).
    max_scale = r.int_in(MAX_SCALE, 1, 1000, 10, "an integer from 1 to 1000")
    max_known = not r.problems or r.problems[-1].key != MAX_SCALE
    note = f"max-scale ({max_scale})"
    # Against a bad max-scale (already reported) only the absolute range is checked.
    limit = max_scale if max_known else 1000
    min_scale = r.int_in(MIN_SCALE, 0, 1000, 0, f"an integer from 0 to {note}")
    if min_scale > limit:
        r.bad(MIN_SCALE, f"an integer from 0 to {note}")
        min_scale = 0
    initial_scale = r.int_in(INITIAL_SCALE, 1, 1000, 1, f"an integer from 1 to {note}")
    if initial_scale > limit:
        r.bad(INITIAL_SCALE, f"an integer from 1 to {note}")
        initial_scale = 1
    return _Scale(min_scale, max_scale, initial_scale, limit, note)


def _positive(x: float) -> bool:
    return x > 0


def _percent(x: float) -> bool:
    return 1 <= x <= 100


def _read_targets(
    r: _Reader, engine: str
) -> tuple[float, float | None, float | None, float | None]:
    """target-concurrency, target-queue-depth, and the KV-cache and GPU targets as fractions."""
    concurrency = r.number(
        TARGET_CONCURRENCY, default=16.0, allowed="a number > 0", check=_positive
    )
    queue_depth = r.optional_number(TARGET_QUEUE_DEPTH, allowed="a number > 0", check=_positive)
    kv_pct = r.optional_number(
        TARGET_KV_CACHE, allowed="a percentage from 1 to 100", check=_percent
    )
    if kv_pct is not None and engine != "vllm":
        r.bad(
            TARGET_KV_CACHE,
            f"only with {ENGINE} vllm (engine is {engine}: it exports no KV-cache usage)",
        )
        kv_pct = None
    gpu_pct = r.optional_number(TARGET_GPU, allowed="a percentage from 1 to 100", check=_percent)
    kv = None if kv_pct is None else kv_pct / 100.0
    gpu = None if gpu_pct is None else gpu_pct / 100.0
    return concurrency, queue_depth, kv, gpu


def _read_windows(r: _Reader) -> tuple[float, float, float, float, float, float]:
    """window, panic window and threshold, scale-down delay, up and down rates."""
    window_s = r.duration(WINDOW, 6.0, 3600.0, 60.0)
    panic_window_pct = r.number(
        PANIC_WINDOW_PCT, default=10.0, allowed="a percentage from 1 to 100", check=_percent
    )
    panic_threshold_pct = r.number(
        PANIC_THRESHOLD_PCT,
        default=200.0,
        allowed="a percentage from 110 to 1000",
        check=lambda x: 110 <= x <= 1000,
    )
    delay_s = r.duration(SCALE_DOWN_DELAY, 0.0, 3600.0, 60.0)
    up = r.number(MAX_SCALE_UP_RATE, default=1000.0, allowed="a number > 1", check=lambda x: x > 1)
    down = r.number(MAX_SCALE_DOWN_RATE, default=2.0, allowed="a number > 1", check=lambda x: x > 1)
    return window_s, panic_window_pct, panic_threshold_pct, delay_s, up, down


def _read_grace(r: _Reader) -> tuple[float, bool]:
    """The grace period in seconds, and whether it is ``adaptive``."""
    text = r.annotations.get(GRACE_PERIOD)
    if text is not None and text.strip() == "adaptive":
        return 300.0, True  # the fixed fallback while the idle history is short
    return r.duration(GRACE_PERIOD, 0.0, 24 * 3600.0, 300.0, also=", or adaptive"), False


def _read_placement(r: _Reader, scale: _Scale) -> PlacementConfig:
    policy = r.choice(PLACEMENT_POLICY, PLACEMENT_POLICIES, "on-demand")
    within = f"an integer from 0 to {scale.note}"
    baseline = r.int_in(ON_DEMAND_BASELINE, 0, 1000, 1, within)
    if baseline > scale.limit:
        r.bad(ON_DEMAND_BASELINE, within)
        baseline = 1
    fallback = r.choice(FALLBACK, FALLBACKS, "dynamic")
    overprovision = r.int_in(SPOT_OVERPROVISION, 0, 1000, 0, within)
    if overprovision > scale.limit:
        r.bad(SPOT_OVERPROVISION, within)
        overprovision = 0
    return PlacementConfig(
        policy=policy,
        on_demand_baseline=baseline,
        fallback=fallback,
        spot_overprovision=overprovision,
        pending_timeout_s=r.duration(PENDING_TIMEOUT, 10.0, 3600.0, 180.0),
    )


def _read_warm(r: _Reader, engine: str, min_scale: int, grace_s: float) -> tuple[float | None, int]:
    """The warm tier: off unless sleep-after is set; it needs vLLM's sleep mode
    and must come before the grace period on the same idle clock."""
    sleep_after_s = r.get(SLEEP_AFTER, _duration, "a duration from 1s to 24h")
    if sleep_after_s is not None and not 1.0 <= sleep_after_s <= 24 * 3600.0:
        r.bad(SLEEP_AFTER, "a duration from 1s to 24h")
        sleep_after_s = None
    sleep_level = r.int_in(SLEEP_LEVEL, 1, 2, 1, "1 or 2")
    if sleep_after_s is not None and engine != "vllm":
        r.bad(SLEEP_AFTER, f"only with {ENGINE} vllm (engine is {engine}: it has no sleep mode)")
    elif sleep_after_s is not None and min_scale == 0 and sleep_after_s >= grace_s:
        r.bad(
            SLEEP_AFTER,
            f"a duration shorter than {GRACE_PERIOD} ({_fmt_duration(grace_s)}): "
            "both count from the same idle start",
        )
    return sleep_after_s, sleep_level


def _read_slo(r: _Reader) -> tuple[float | None, float, float | None]:
    """The TTFT objective in seconds, the attainment as a fraction, and the
    inter-token objective in seconds, checked together."""
    slo_ttft_s = r.get(SLO_TTFT, _duration, "a duration from 100ms to 10m")
    if slo_ttft_s is not None and not 0.1 <= slo_ttft_s <= 600.0:
        r.bad(SLO_TTFT, "a duration from 100ms to 10m")
        slo_ttft_s = None
    attainment_pct = r.number(
        SLO_ATTAINMENT,
        default=99.0,
        allowed="a percentage from 50 to 99.99",
        check=lambda x: 50 <= x <= 99.99,
    )
    if SLO_ATTAINMENT in r.annotations and SLO_TTFT not in r.annotations:
        r.bad(SLO_ATTAINMENT, f"only with {SLO_TTFT} (the objective it is a share of)")
    slo_tpot_s = r.get(SLO_TPOT, _duration, "a duration from 1ms to 10s")
    if slo_tpot_s is not None and not 0.001 <= slo_tpot_s <= 10.0:
        r.bad(SLO_TPOT, "a duration from 1ms to 10s")
        slo_tpot_s = None
    if SLO_TPOT in r.annotations and SLO_TTFT not in r.annotations:
        r.bad(SLO_TPOT, f"only with {SLO_TTFT} (SLO-first scaling sizes for both)")
    return slo_ttft_s, attainment_pct / 100.0, slo_tpot_s


def parse_scaling_config(annotations: Mapping[str, str]) -> ScalingConfig:
    """Validate ``annotations`` and build the target's :class:`ScalingConfig`.

    Raises :class:`InvalidAnnotation` naming every bad value (see the module
    docstring for what counts as bad). Unknown keys are not read here:
    :func:`unknown_keys` names them, as warnings.
    """
    r = _Reader(annotations)
    scale = _read_scale(r)
    engine = r.choice(ENGINE, ENGINES, "vllm")
    concurrency, queue_depth, kv, gpu = _read_targets(r, engine)
    window_s, panic_window_pct, panic_threshold_pct, delay_s, up, down = _read_windows(r)
    grace_s, adaptive_grace = _read_grace(r)
    metrics_port = r.get(
        METRICS_PORT, _port, "a port number from 1 to 65535 or a port name (IANA_SVC_NAME)"
    )
    placement = _read_placement(r, scale)
    sleep_after_s, sleep_level = _read_warm(r, engine, scale.min_scale, grace_s)
    slo_ttft_s, attainment, slo_tpot_s = _read_slo(r)
    # Read by the activator, which unloads idle adapters; checked here so that
    # a bad value is an InvalidAnnotation Event like every other key.
    adapter_keep_alive_s = r.duration(ADAPTER_KEEP_ALIVE, 1.0, 24 * 3600.0, 600.0)
    if r.problems:
        raise InvalidAnnotation.from_problems(tuple(r.problems))
    return ScalingConfig(
        min_scale=scale.min_scale,
        max_scale=scale.max_scale,
        initial_scale=scale.initial_scale,
        engine=engine,
        target_concurrency=concurrency,
        target_queue_depth=queue_depth,
        target_kv_cache_utilization=kv,
        target_gpu_utilization=gpu,
        window_s=window_s,
        panic_window_percentage=panic_window_pct,
        panic_threshold_percentage=panic_threshold_pct,
        scale_down_delay_s=delay_s,
        max_scale_up_rate=up,
        max_scale_down_rate=down,
        scale_to_zero_grace_s=grace_s,
        scale_to_zero_grace_adaptive=adaptive_grace,
        metrics_port=8000 if metrics_port is None else metrics_port,
        placement=placement,
        sleep_after_s=sleep_after_s,
        sleep_level=sleep_level,
        slo_ttft_s=slo_ttft_s,
        slo_attainment=attainment,
        adapter_keep_alive_s=adapter_keep_alive_s,
        slo_tpot_s=slo_tpot_s,
    )


def check_supported(config: ScalingConfig, *, gpu_metrics: bool) -> None:
    """Reject a ``config`` whose signals this scaler's setup can never measure.

    ``gpu_metrics``: the scaler queries a Prometheus for DCGM utilization.
    Without it only Triton's own ``nv_gpu_utilization`` gives GPU utilization.
    Raises :class:`InvalidAnnotation` naming the key, its value and what is
    allowed (the KV-cache target is checked by :func:`parse_scaling_config`).
    """
    gpu = config.target_gpu_utilization
    if gpu is not None and not (gpu_metrics or config.engine == "triton"):
        raise InvalidAnnotation(
            TARGET_GPU,
            f"{round(gpu * 100)}",
            f"only with {ENGINE} triton, or when the scaler has a Prometheus URL "
            "(it needs GPU metrics)",
        )
