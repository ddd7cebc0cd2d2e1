"""The warm tier's pure rules: a model's replicas sleep (vLLM sleep mode) instead of going to zero.

"Warm" in Tidal means this tier and nothing else: replicas that keep their
pod and process but give back their GPU memory, and wake in about a second.
(Staying up rather than going to zero is *keep-alive*,
:mod:`scaler.policy.idle`; a new policy state's first window is its
*settling* time, :mod:`scaler.policy.decide`.)

- :mod:`scaler.policy.warm_tier.ladder`: when a model's replicas sleep, which
  one wakes, and whether a sleeper goes to zero;
- :mod:`scaler.policy.warm_tier.room`: on a GPU shared by several models,
  who sleeps so that a wake or a new pod fits, and each model's memory.

The I/O side (the sleep and wake calls, the books) is :mod:`scaler.warm`.
"""

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
    MemoryBook,
    Resident,
    RoomPlan,
    WakePlan,
    keep_room_to_wake,
    make_room,
    place_pod,
    plan_wake,
)

__all__ = [
    "BUSY_WAIT_S",
    "MemoryBook",
    "Replica",
    "Resident",
    "RoomPlan",
    "Rung",
    "WakePlan",
    "choose_wake",
    "keep_room_to_wake",
    "make_room",
    "mean_gap_s",
    "place_pod",
    "plan_wake",
    "replicas_to_sleep",
    "rung",
    "sleep_due",
    "sleep_or_zero",
]
