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
- **Each key's grammar is shared** (:mod:`groundwork.rules.scaling_keys`,
  which the activator reads the keys it acts on with): durations are
  Go-style (``500ms``, ``90s``, ``5m``, ``1h30m``; a bare ``0`` too),
  percentages are 0-100 and become fractions here. What is decided here is
  the rules *between* keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from groundwork.rules.annotation_keys import (
    ANNOTATIONS_PAGE,
    Key,
    KeyReader,
    unknown_key_problem,
    unknown_key_problems,
)
from groundwork.rules.annotation_keys import Problem as AnnotationProblem
from groundwork.rules.durations import format_duration
from groundwork.rules.pool_keys import POOL_KEYS
from groundwork.rules.scaling_keys import (
    ADAPTER_KEEP_ALIVE,
    ADAPTIVE,
    AUTOSCALING_PREFIX,
    ENGINE,
    FALLBACK,
    GRACE_PERIOD,
    INITIAL_SCALE,
    MAX_SCALE,
    MAX_SCALE_DOWN_RATE,
    MAX_SCALE_UP_RATE,
    METRICS_PORT,
    MIN_SCALE,
    ON_DEMAND_BASELINE,
    PANIC_THRESHOLD_PCT,
    PANIC_WINDOW_PCT,
    PENDING_TIMEOUT,
    PLACEMENT_POLICY,
    PLACEMENT_PREFIX,
    SCALE_DOWN_DELAY,
    SCALING_KEYS,
    SLEEP_AFTER,
    SLEEP_LEVEL,
    SLO_ATTAINMENT,
    SLO_TPOT,
    SLO_TTFT,
    SPOT_OVERPROVISION,
    TARGET_CONCURRENCY,
    TARGET_GPU,
    TARGET_KV_CACHE,
    TARGET_QUEUE_DEPTH,
    WINDOW,
)
from scaler.policy.api import PlacementConfig, ScalingConfig

__all__ = [
    "ANNOTATIONS_PAGE",
    "AUTOSCALING_PREFIX",
    "KNOWN_KEYS",
    "PLACEMENT_PREFIX",
    "STATUS_ANNOTATION",
    "AnnotationProblem",
    "AnnotationSpec",
    "InvalidAnnotation",
    "check_supported",
    "parse_scaling_config",
    "unknown_key_problem",
    "unknown_keys",
]

STATUS_ANNOTATION = AUTOSCALING_PREFIX + "status"
_ENABLED = AUTOSCALING_PREFIX + "enabled"

#: Every key this module reads, and the InferencePool keys (scaler.policy.pool_annotations).
KNOWN_KEYS: tuple[str, ...] = tuple(key.name for key in (*SCALING_KEYS, *POOL_KEYS))


@dataclass(frozen=True, slots=True)
class AnnotationSpec:
    """A row of docs/annotations.md for keys read by a reader of their own (the GPU
    shapes' ``placement.tidal.dev/shape-args.<shape>``), where one key of
    :data:`~groundwork.rules.scaling_keys.SCALING_KEYS` has its grammar instead."""

    key: str
    default: str
    allowed: str
    meaning: str


# Written by Tidal: the status, and the record of the on-demand pin (policy.companion).
_ALLOWED_UNREAD = frozenset({STATUS_ANNOTATION, _ENABLED, PLACEMENT_PREFIX + "on-demand-pin"})


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


def unknown_keys(annotations: Mapping[str, str]) -> tuple[AnnotationProblem, ...]:
    """Every ``autoscaling.tidal.dev/*`` or ``placement.tidal.dev/*`` key this module does not
    read, each with the closest known key. They are warnings: scaling goes on with the keys
    that are known (:func:`parse_scaling_config` ignores these)."""
    return unknown_key_problems(
        annotations,
        prefixes=(AUTOSCALING_PREFIX, PLACEMENT_PREFIX),
        known=KNOWN_KEYS,
        also_known=_ALLOWED_UNREAD,
    )


@dataclass(frozen=True, slots=True)
class _Scale:
    min_scale: int
    max_scale: int
    initial_scale: int
    limit: int  # max-scale, or 1000 when max-scale is itself bad
    note: str  # "max-scale (N)", for the messages of the checks against it


def _at_most(r: KeyReader, key: Key[int], scale_limit: int, says: str) -> int:
    """``key``'s whole number, within its grammar and at most ``scale_limit``."""
    value = r.value(key, says=says)
    if value > scale_limit:
        r.bad(key, says)
        return key.default_value()
    return value


def _read_scale(r: KeyReader) -> _Scale:
    # max-scale first: several ranges depend on it. A bad one falls back to
    # the default only for those checks (it is reported anyway).
    max_scale = r.value(MAX_SCALE)
    note = f"max-scale ({max_scale})"
    # Against a bad max-scale (already reported) only the absolute range is checked.
    limit = 1000 if r.last_was_bad(MAX_SCALE) else max_scale
    min_scale = _at_most(r, MIN_SCALE, limit, f"an integer from 0 to {note}")
    initial_scale = _at_most(r, INITIAL_SCALE, limit, f"an integer from 1 to {note}")
    return _Scale(min_scale, max_scale, initial_scale, limit, note)


def _fraction(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def _read_targets(
    r: KeyReader, engine: str
) -> tuple[float, float | None, float | None, float | None]:
    """target-concurrency, target-queue-depth, and the KV-cache and GPU targets as fractions."""
    concurrency = r.value(TARGET_CONCURRENCY)
    queue_depth = r.get(TARGET_QUEUE_DEPTH)
    kv_pct = r.get(TARGET_KV_CACHE)
    if kv_pct is not None and engine != "vllm":
        r.bad(
            TARGET_KV_CACHE,
            f"only with {ENGINE.name} vllm (engine is {engine}: it exports no KV-cache usage)",
        )
        kv_pct = None
    return concurrency, queue_depth, _fraction(kv_pct), _fraction(r.get(TARGET_GPU))


def _read_windows(r: KeyReader) -> tuple[float, float, float, float, float, float]:
    """window, panic window and threshold, scale-down delay, up and down rates."""
    return (
        r.value(WINDOW),
        r.value(PANIC_WINDOW_PCT),
        r.value(PANIC_THRESHOLD_PCT),
        r.value(SCALE_DOWN_DELAY),
        r.value(MAX_SCALE_UP_RATE),
        r.value(MAX_SCALE_DOWN_RATE),
    )


# The grace period while an adaptive one's idle history is short.
_FIXED_GRACE_S = 300.0


def _read_grace(r: KeyReader) -> tuple[float, bool]:
    """The grace period in seconds, and whether it is ``adaptive``."""
    grace = r.value(GRACE_PERIOD)
    if grace == ADAPTIVE:
        return _FIXED_GRACE_S, True
    assert isinstance(grace, float)  # the grammar's other value
    return grace, False


def _read_placement(r: KeyReader, scale: _Scale) -> PlacementConfig:
    within = f"an integer from 0 to {scale.note}"
    return PlacementConfig(
        policy=r.value(PLACEMENT_POLICY),
        on_demand_baseline=_at_most(r, ON_DEMAND_BASELINE, scale.limit, within),
        fallback=r.value(FALLBACK),
        spot_overprovision=_at_most(r, SPOT_OVERPROVISION, scale.limit, within),
        pending_timeout_s=r.value(PENDING_TIMEOUT),
    )


def _read_warm(
    r: KeyReader, engine: str, min_scale: int, grace_s: float
) -> tuple[float | None, int]:
    """The warm tier: off unless sleep-after is set; it needs vLLM's sleep mode
    and must come before the grace period on the same idle clock."""
    sleep_after_s = r.get(SLEEP_AFTER)
    sleep_level = r.value(SLEEP_LEVEL)
    if sleep_after_s is not None and engine != "vllm":
        r.bad(
            SLEEP_AFTER, f"only with {ENGINE.name} vllm (engine is {engine}: it has no sleep mode)"
        )
    elif sleep_after_s is not None and min_scale == 0 and sleep_after_s >= grace_s:
        r.bad(
            SLEEP_AFTER,
            f"a duration shorter than {GRACE_PERIOD.name} ({format_duration(grace_s)}): "
            "both count from the same idle start",
        )
    return sleep_after_s, sleep_level


def _read_slo(r: KeyReader) -> tuple[float | None, float, float | None]:
    """The TTFT objective in seconds, the attainment as a fraction, and the
    inter-token objective in seconds, checked together."""
    slo_ttft_s = r.get(SLO_TTFT)
    attainment_pct = r.value(SLO_ATTAINMENT)
    if SLO_ATTAINMENT.name in r.annotations and SLO_TTFT.name not in r.annotations:
        r.bad(SLO_ATTAINMENT, f"only with {SLO_TTFT.name} (the objective it is a share of)")
    slo_tpot_s = r.get(SLO_TPOT)
    if SLO_TPOT.name in r.annotations and SLO_TTFT.name not in r.annotations:
        r.bad(SLO_TPOT, f"only with {SLO_TTFT.name} (SLO-first scaling sizes for both)")
    return slo_ttft_s, attainment_pct / 100.0, slo_tpot_s


def parse_scaling_config(annotations: Mapping[str, str]) -> ScalingConfig:
    """Validate ``annotations`` and build the target's :class:`ScalingConfig`.

    Raises :class:`InvalidAnnotation` naming every bad value (see the module
    docstring for what counts as bad). Unknown keys are not read here:
    :func:`unknown_keys` names them, as warnings.
    """
    r = KeyReader(annotations)
    scale = _read_scale(r)
    engine = r.value(ENGINE)
    concurrency, queue_depth, kv, gpu = _read_targets(r, engine)
    window_s, panic_window_pct, panic_threshold_pct, delay_s, up, down = _read_windows(r)
    grace_s, adaptive_grace = _read_grace(r)
    metrics_port = r.value(METRICS_PORT)
    placement = _read_placement(r, scale)
    sleep_after_s, sleep_level = _read_warm(r, engine, scale.min_scale, grace_s)
    slo_ttft_s, attainment, slo_tpot_s = _read_slo(r)
    # Read by the activator, which unloads idle adapters; checked here so that
    # a bad value is an InvalidAnnotation Event like every other key.
    adapter_keep_alive_s = r.value(ADAPTER_KEEP_ALIVE)
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
        metrics_port=metrics_port,
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
            TARGET_GPU.name,
            f"{round(gpu * 100)}",
            f"only with {ENGINE.name} triton, or when the scaler has a Prometheus URL "
            "(it needs GPU metrics)",
        )
