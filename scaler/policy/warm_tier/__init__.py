"""The warm tier's pure rules: a model's replicas sleep (vLLM sleep mode) instead of going to zero.

"Warm" in Tidal means this tier and nothing else: replicas that keep their
pod and process but give back their GPU memory, and wake in about a second.
(Staying up rather than going to zero is *keep-alive*,
:mod:`scaler.policy.idle`; a new policy state's first window is its
*settling* time, :mod:`scaler.policy.decide`.)

- :mod:`scaler.policy.warm_tier.ladder`: when a model's replicas sleep, which
  one wakes, and whether a sleeper goes to zero;
- :mod:`scaler.policy.warm_tier.room`: on a GPU shared by several models,
  who sleeps so that a wake or a new pod fits, and each model's memory;
- :mod:`scaler.policy.warm_tier.gpu_use`: what a device is doing for the
  bill (serving, starting, sleeping-only), counted whole;
- :mod:`scaler.policy.warm_tier.depth`: how deep an idle model sleeps
  (level 1, level 2 or zero) on expected cost;
- :mod:`scaler.policy.warm_tier.sites`: which held device a new pod goes to
  (beside models already serving);
- :mod:`scaler.policy.warm_tier.emptying`: how a device of sleepers alone is
  emptied (its sleepers moved beside serving models, or to zero).

The I/O side (the sleep and wake calls, the books) is :mod:`scaler.warm`.
"""

from scaler.policy.warm_tier.depth import ZERO, Depth, Rungs, choose_depth, rank_for_host_memory
from scaler.policy.warm_tier.emptying import (
    Emptying,
    Leaver,
    MoveCosts,
    plan_emptying,
    plan_rehoming,
)
from scaler.policy.warm_tier.gpu_use import GpuSeconds, GpuUse, PodUse, gpu_use
from scaler.policy.warm_tier.ladder import (
    Replica,
    Rung,
    choose_wake,
    mean_gap_s,
    replicas_to_sleep,
    rung,
    sleep_due,
    sleep_or_zero,
)
from scaler.policy.warm_tier.room import (
    BUSY_WAIT_S,
    HANDOFF_S,
    MemoryBook,
    Resident,
    RoomPlan,
    WakePlan,
    busy_model,
    holeless,
    keep_room_to_wake,
    make_room,
    place_pod,
    plan_wake,
    settled,
)
from scaler.policy.warm_tier.sites import Site, SiteChoice, choose_site, pair_site

__all__ = [
    "BUSY_WAIT_S",
    "HANDOFF_S",
    "ZERO",
    "Depth",
    "Emptying",
    "GpuSeconds",
    "GpuUse",
    "Leaver",
    "MemoryBook",
    "MoveCosts",
    "PodUse",
    "Replica",
    "Resident",
    "RoomPlan",
    "Rung",
    "Rungs",
    "Site",
    "SiteChoice",
    "WakePlan",
    "busy_model",
    "choose_depth",
    "choose_site",
    "choose_wake",
    "gpu_use",
    "holeless",
    "keep_room_to_wake",
    "make_room",
    "mean_gap_s",
    "pair_site",
    "place_pod",
    "plan_emptying",
    "plan_rehoming",
    "plan_wake",
    "rank_for_host_memory",
    "replicas_to_sleep",
    "rung",
    "settled",
    "sleep_due",
    "sleep_or_zero",
]
