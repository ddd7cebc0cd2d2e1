"""The autoscaling and placement annotations (``autoscaling.tidal.dev/*``,
``placement.tidal.dev/*``): each key and its grammar.

The scaler reads every key (:func:`scaler.policy.annotations.parse_scaling_config`,
which adds the rules between keys: min <= max, the KV-cache target only
with vLLM, ...); the simulator parses the same annotations through it; the
activator reads the two it acts on, ``adapter-keep-alive`` (it unloads idle
adapters) and ``slo-ttft`` (its presence makes it count tokens), with the
same grammar, so a value the scaler refuses is one the activator ignores.
docs/annotations.md is generated from this table.

Main decisions:

- **The grammar of one value is here; the rules between keys are the
  scaler's** (a key's range may depend on another's value, and only the
  scaler acts on them together). Each key's grammar states its widest
  range (``min-scale``: 0 to 1000) and the scaler narrows it (to
  ``max-scale``).
- **Percentages are 0-100 in annotations** whatever unit a metric uses; the
  grammar reads the number, the scaler makes it a fraction.
- **``scale-to-zero-grace-period: adaptive``** is a value of its own, read
  here as :data:`ADAPTIVE`.
"""

from __future__ import annotations

from typing import Any

from groundwork.rules.annotation_keys import Key
from groundwork.rules.values import (
    CONTAINER_PORT,
    Grammar,
    duration_in,
    number_where,
    one_of,
    whole_in,
)

__all__ = [
    "ADAPTER_KEEP_ALIVE",
    "ADAPTIVE",
    "AUTOSCALING_PREFIX",
    "ENGINE",
    "ENGINES",
    "FALLBACK",
    "FALLBACKS",
    "GRACE_PERIOD",
    "INITIAL_SCALE",
    "MAX_SCALE",
    "MAX_SCALE_DOWN_RATE",
    "MAX_SCALE_UP_RATE",
    "METRICS_PORT",
    "MIN_SCALE",
    "ON_DEMAND_BASELINE",
    "PANIC_THRESHOLD_PCT",
    "PANIC_WINDOW_PCT",
    "PENDING_TIMEOUT",
    "PLACEMENT_POLICIES",
    "PLACEMENT_POLICY",
    "PLACEMENT_PREFIX",
    "SCALE_DOWN_DELAY",
    "SCALING_KEYS",
    "SLEEP_AFTER",
    "SLEEP_LEVEL",
    "SLO_ATTAINMENT",
    "SLO_TPOT",
    "SLO_TTFT",
    "SPOT_OVERPROVISION",
    "TARGET_CONCURRENCY",
    "TARGET_GPU",
    "TARGET_KV_CACHE",
    "TARGET_QUEUE_DEPTH",
    "WINDOW",
]

AUTOSCALING_PREFIX = "autoscaling.tidal.dev/"
PLACEMENT_PREFIX = "placement.tidal.dev/"
_A = AUTOSCALING_PREFIX
_P = PLACEMENT_PREFIX

ENGINES = ("vllm", "triton", "generic")
PLACEMENT_POLICIES = ("on-demand", "spot", "spot-with-on-demand-baseline")
FALLBACKS = ("dynamic", "none")
#: ``scale-to-zero-grace-period: adaptive``: the grace period is learned per model.
ADAPTIVE = "adaptive"
_MOST_REPLICAS = 1000
_DAY_S = 24 * 3600.0

_POSITIVE = number_where(lambda x: x > 0, "a number > 0")
_ABOVE_ONE = number_where(lambda x: x > 1, "a number > 1")


def _percent(low: float, high: float) -> Grammar[float]:
    return number_where(lambda x: low <= x <= high, f"a percentage from {low:g} to {high:g}")


_GRACE_RANGE_S = (0.0, _DAY_S)
_GRACE_DURATION = duration_in(*_GRACE_RANGE_S, also=", or adaptive")


def _grace(text: str) -> float | str:
    return ADAPTIVE if text.strip() == ADAPTIVE else _GRACE_DURATION.parse(text)


MIN_SCALE = Key(
    _A + "min-scale", whole_in(0, _MOST_REPLICAS), "0", "0 to max-scale", "fewest replicas"
)
MAX_SCALE = Key(_A + "max-scale", whole_in(1, _MOST_REPLICAS), "10", "1 to 1000", "most replicas")
INITIAL_SCALE = Key(
    _A + "initial-scale",
    whole_in(1, _MOST_REPLICAS),
    "1",
    "1 to max-scale",
    "replicas to wake to from zero",
)
ENGINE = Key(
    _A + "engine",
    one_of(*ENGINES),
    "vllm",
    "`vllm`, `triton`, `generic`",
    "which model-server metrics to read",
)
TARGET_CONCURRENCY = Key(
    _A + "target-concurrency",
    _POSITIVE,
    "16",
    "a number > 0",
    "concurrency per replica: requests in flight plus held, the larger of what the"
    " activators and the servers (running + waiting) see",
)
TARGET_QUEUE_DEPTH = Key(
    _A + "target-queue-depth",
    _POSITIVE,
    "",
    "a number > 0",
    "queue depth per replica: requests held by the activators plus waiting on the servers",
)
TARGET_KV_CACHE = Key(
    _A + "target-kv-cache-utilization",
    _percent(1, 100),
    "",
    "1 to 100 (percent); only with engine `vllm`",
    "vLLM KV-cache usage per replica",
)
TARGET_GPU = Key(
    _A + "target-gpu-utilization",
    _percent(1, 100),
    "",
    "1 to 100 (percent)",
    "GPU utilization per replica, from DCGM or Triton",
)
WINDOW = Key(_A + "window", duration_in(6.0, 3600.0), "60s", "6s to 1h", "stable averaging window")
PANIC_WINDOW_PCT = Key(
    _A + "panic-window-percentage",
    _percent(1, 100),
    "10",
    "1 to 100",
    "panic window as a share of the stable window (at least 1 s)",
)
PANIC_THRESHOLD_PCT = Key(
    _A + "panic-threshold-percentage",
    _percent(110, 1000),
    "200",
    "110 to 1000",
    "enter panic mode (scale up at once, never down) when desired/ready reaches this percentage",
)
SCALE_DOWN_DELAY = Key(
    _A + "scale-down-delay",
    duration_in(0.0, 3600.0),
    "60s",
    "0s to 1h",
    "hold the highest recent decision this long before going down",
)
MAX_SCALE_UP_RATE = Key(
    _A + "max-scale-up-rate",
    _ABOVE_ONE,
    "1000",
    "a number > 1",
    "per decision, desired <= rate x max(ready, 1)",
)
MAX_SCALE_DOWN_RATE = Key(
    _A + "max-scale-down-rate",
    _ABOVE_ONE,
    "2",
    "a number > 1",
    "per decision, desired >= ready / rate",
)
GRACE_PERIOD = Key(
    _A + "scale-to-zero-grace-period",
    Grammar(_grace, _GRACE_DURATION.says),
    "5m",
    "0s to 24h, or `adaptive`",
    "idle time (no request held or in flight anywhere) before going to zero;"
    " `adaptive` learns each model's idle times and keeps it warm while the next"
    " request is likely (fixed 5m while its history is short)",
)
METRICS_PORT = Key(
    _A + "metrics-port",
    CONTAINER_PORT,
    "8000",
    "a port number 1 to 65535 or a container port name",
    "port of the pods' `/metrics`",
)
PLACEMENT_POLICY = Key(
    _P + "policy",
    one_of(*PLACEMENT_POLICIES),
    "on-demand",
    "`on-demand`, `spot`, `spot-with-on-demand-baseline`",
    "capacity types used",
)
ON_DEMAND_BASELINE = Key(
    _P + "on-demand-baseline",
    whole_in(0, _MOST_REPLICAS),
    "1",
    "0 to max-scale",
    "on-demand replicas kept while scaled above zero",
)
FALLBACK = Key(
    _P + "fallback",
    one_of(*FALLBACKS),
    "dynamic",
    "`dynamic`, `none`",
    "`dynamic`: on-demand replicas cover spot ones that are not ready",
)
SPOT_OVERPROVISION = Key(
    _P + "spot-overprovision",
    whole_in(0, _MOST_REPLICAS),
    "0",
    "0 to max-scale",
    "extra spot replicas above the target",
)
PENDING_TIMEOUT = Key(
    _P + "pending-timeout",
    duration_in(10.0, 3600.0),
    "3m",
    "10s to 1h",
    "a spot replica, or a replica of a GPU shape, pending this long counts as unavailable"
    " (spot, or that shape, ran out: [shapes](shapes.md#pending-past-the-pending-timeout))",
)
SLEEP_AFTER = Key(
    _A + "sleep-after",
    duration_in(1.0, _DAY_S),
    "",
    "1s to 24h, shorter than the grace period when min-scale is 0; only with engine `vllm`",
    "warm tier: idle this long, the replicas sleep (vLLM sleep mode) and wake in about a"
    " second; unset: off (docs/warm-tier.md)",
)
SLEEP_LEVEL = Key(
    _A + "sleep-level",
    whole_in(1, 2, says="1 or 2"),
    "1",
    "`1`, `2`",
    "vLLM sleep level: 1 keeps the weights in the node's host RAM (fastest wake; where"
    " that RAM is full of other sleepers' weights, level 2 instead), 2 drops them",
)
SLO_TTFT = Key(
    _A + "slo-ttft",
    duration_in(0.1, 600.0),
    "",
    "100ms to 10m",
    "SLO-first scaling: the time-to-first-token objective. Set, Tidal sizes the model for"
    " the work of both phases (prompt tokens to prefill, tokens to generate) against the"
    " capacity it learns per replica from the servers' counters, for the load expected"
    " over the next cold start, and keeps it warm while a request within a cold start is"
    " likely enough; prompts whose prefill alone exceeds it buy no replica."
    " target-concurrency, window, panic and scale-down-delay are then not used (the other"
    " targets, when set, still raise the count)",
)
SLO_ATTAINMENT = Key(
    _A + "slo-attainment",
    _percent(50, 99.99),
    "99",
    "50 to 99.99 (percent); only with slo-ttft",
    "the share of requests that must meet slo-ttft",
)
SLO_TPOT = Key(
    _A + "slo-tpot",
    duration_in(0.001, 10.0),
    "",
    "1ms to 10s; only with slo-ttft",
    "the inter-token objective: each sequence's tokens at most this far apart on"
    " average, so a replica runs no more sequences at once than keep its steps"
    " within it; unset: a replica's full batch, and decode must only never queue",
)
ADAPTER_KEEP_ALIVE = Key(
    _A + "adapter-keep-alive",
    duration_in(1.0, _DAY_S),
    "10m",
    "1s to 24h",
    "a LoRA adapter idle this long is unloaded from its replica by the activator"
    " ([adapters](adapters.md))",
)

#: Every scaling key, in the order of docs/annotations.md.
SCALING_KEYS: tuple[Key[Any], ...] = (
    MIN_SCALE,
    MAX_SCALE,
    INITIAL_SCALE,
    ENGINE,
    TARGET_CONCURRENCY,
    TARGET_QUEUE_DEPTH,
    TARGET_KV_CACHE,
    TARGET_GPU,
    WINDOW,
    PANIC_WINDOW_PCT,
    PANIC_THRESHOLD_PCT,
    SCALE_DOWN_DELAY,
    MAX_SCALE_UP_RATE,
    MAX_SCALE_DOWN_RATE,
    GRACE_PERIOD,
    METRICS_PORT,
    PLACEMENT_POLICY,
    ON_DEMAND_BASELINE,
    FALLBACK,
    SPOT_OVERPROVISION,
    PENDING_TIMEOUT,
    SLEEP_AFTER,
    SLEEP_LEVEL,
    SLO_TTFT,
    SLO_ATTAINMENT,
    SLO_TPOT,
    ADAPTER_KEEP_ALIVE,
)
