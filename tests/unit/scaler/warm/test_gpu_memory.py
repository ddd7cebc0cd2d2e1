"""GPU memory from DCGM answers, and the warm tier's plan to make room before a wake."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from scaler.policy.api import ScalingConfig
from scaler.signals.prometheus_query import PrometheusError, parse_vector
from scaler.warm.gpu_memory import GpuMemory, GpuMemorySnapshot, parse_memory
from tests.unit.scaler.warm.test_tier import CONFIG, PAST_HANDOFF_S, FakeReplicas, World, pod


def _vector(*samples: tuple[dict[str, str], float]) -> dict[str, object]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": m, "value": [0, str(v)]} for m, v in samples],
        },
    }


def test_parse_memory_by_pod_and_gpu() -> None:
    used = _vector(
        ({"pod": "a-1", "namespace": "ml", "UUID": "GPU-1"}, 24600),
        ({"pod": "b-1", "namespace": "ml", "UUID": "GPU-1"}, 600),
        ({"pod": "c-1", "namespace": "ml"}, 5),  # no UUID: left out
    )
    free = _vector(({"UUID": "GPU-1"}, 24800))
    snap = parse_memory(
        parse_vector(used), parse_vector(free), at=1.0, pod_label="pod", namespace_label="namespace"
    )
    assert snap.pods == {("ml", "a-1"): ("GPU-1", 24600.0), ("ml", "b-1"): ("GPU-1", 600.0)}
    assert snap.budget("GPU-1") == 50_000
    assert snap.budget("GPU-2") is None
    with pytest.raises(PrometheusError, match="query failed"):
        parse_vector({"status": "error"})


def test_a_stale_snapshot_is_not_used() -> None:
    memory = GpuMemory(stale_after_s=10)
    memory.snapshot = GpuMemorySnapshot(at=0.0)
    assert memory.fresh(5.0) is memory.snapshot
    assert memory.fresh(11.0) is None


@pytest.mark.looptime  # the handoff before the sleep passes in simulated time
async def test_room_is_made_before_the_wake_from_learned_memory() -> None:
    replicas = FakeReplicas(room=1)
    w = World(replicas)
    memory = GpuMemory()
    w.tier.pool.memory = memory
    w.views.used.update({"ml/a": 50.0, "ml/b": 10.0, "ml/c": 30.0})
    pods = {t: pod(f"{t[3]}-1", f"10.0.0.{i}") for i, t in enumerate(("ml/a", "ml/b", "ml/c"), 1)}
    for target, p in pods.items():
        w.tier.pool.remember(target, CONFIG, [p])
    # All three awake once (learned 24 600 MiB each), then a asleep and b, c awake.
    memory.snapshot = GpuMemorySnapshot(
        at=0.0,
        pods={("ml", f"{x}-1"): ("GPU-1", 24_600) for x in "abc"},
        free={"GPU-1": 0},
    )
    assert w.tier.learn(0.0) == 3
    w.idle["ml/a"] = 0.0
    w.tier.consider_sleep("ml/a", CONFIG, [pods["ml/a"]], now=30.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    memory.snapshot = GpuMemorySnapshot(
        at=1.0,
        pods={("ml", "a-1"): ("GPU-1", 600), ("ml", "b-1"): ("GPU-1", 24_600),
              ("ml", "c-1"): ("GPU-1", 24_600)},
        free={"GPU-1": 200},
    )  # fmt: skip
    assert w.tier.learn(1.0) == 3
    assert w.tier.pool.book.wake_need_mib("ml/a") == 24_000
    assert w.tier.choices.plan_room("ml/a-1", "ml/a", 1.0) == (["ml/b-1"], True)  # b: least recent
    replicas.calls.clear()
    outcome = await w.tier.wake("ml/a")
    assert outcome.woke == "ml/a-1" and outcome.evicted == ("ml/b-1",)
    # The room was made first: no failed wake on the way.
    assert [c for c, _ in replicas.calls] == ["sleep", "wake_up", "warm_up"]


def test_without_memory_the_plan_is_to_try() -> None:
    w = World(FakeReplicas())
    config = dataclasses.replace(ScalingConfig(), sleep_after_s=5.0)
    w.tier.pool.remember("ml/a", config, [pod("a-1", "10.0.0.1")])
    assert w.tier.choices.plan_room("ml/a-1", "ml/a", 0.0) == ([], True)


@pytest.mark.looptime  # the handoff before the sleep passes in simulated time
async def test_an_idle_pod_beside_a_sleeping_one_sleeps_to_keep_room_for_its_wake() -> None:
    replicas = FakeReplicas()
    w = World(replicas)
    memory = GpuMemory()
    w.tier.pool.memory = memory
    w.views.used.update({"ml/a": 50.0, "ml/b": 10.0, "ml/c": 30.0})
    pods = {t: pod(f"{t[3]}-1", f"10.0.0.{i}") for i, t in enumerate(("ml/a", "ml/b", "ml/c"), 1)}
    for target, p in pods.items():
        w.tier.pool.remember(target, CONFIG, [p])
    memory.snapshot = GpuMemorySnapshot(
        at=0.0,
        pods={("ml", f"{x}-1"): ("GPU-1", 24_600) for x in "abc"},
        free={"GPU-1": 0},
    )
    w.tier.learn(0.0)
    assert w.tier.keep_room(0.0) == []  # nothing sleeps there: no room to keep
    w.idle["ml/a"] = 0.0
    w.tier.consider_sleep("ml/a", CONFIG, [pods["ml/a"]], now=30.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    memory.snapshot = GpuMemorySnapshot(
        at=1.0,
        pods={("ml", "a-1"): ("GPU-1", 600), ("ml", "b-1"): ("GPU-1", 24_600),
              ("ml", "c-1"): ("GPU-1", 24_600)},
        free={"GPU-1": 200},
    )  # fmt: skip
    w.tier.learn(1.0)
    replicas.calls.clear()
    assert w.tier.keep_room(1.0) == ["ml/b-1"]  # b: least recently used
    await asyncio.sleep(PAST_HANDOFF_S)
    assert [c for c, _ in replicas.calls] == ["sleep"]
    assert "ml/b-1" in w.tier.pool.entries
