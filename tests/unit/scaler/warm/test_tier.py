"""The warm tier's owner (scaler.warm.tier) against fake replicas: sleeps, wakes, room, fallback.

The tier reads the models' views from a fake board (:class:`Views`) and
sends its Events to a list; time is the loop's, simulated by looptime, so
the handoff before a sleep passes exactly, with no real waiting.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Mapping

import pytest

from scaler.kube.types import PodInfo
from scaler.policy.api import ScalingConfig
from scaler.warm.tier import Phase, ReplicaCallFailed, WarmSettings, WarmTier
from scaler.warm.views import ModelBoard, ModelView

CONFIG = dataclasses.replace(ScalingConfig(), sleep_after_s=30.0)

# The loop's clock is looptime's (simulated): a sleep's handoff takes its real
# default length, and a test waits past it instead of racing it.
pytestmark = pytest.mark.looptime
HANDOFF_S = 2.0
PAST_HANDOFF_S = HANDOFF_S + 0.5


class FakeReplicas:
    """Replicas by base URL: who sleeps, the calls made, and a GPU that fits ``room`` awake."""

    def __init__(self, room: int = 100) -> None:
        self.asleep: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.room = room
        self.fail_wake = False
        self.sleep_mode = True  # False: /sleep is not served (404), as without dev mode
        self.host_room = True  # False: a level-1 sleep finds no host memory for the weights
        self.levels: dict[str, int] = {}

    async def sleep(self, base: str, level: int) -> None:
        self.calls.append(("sleep", base))
        if not self.sleep_mode:
            raise ReplicaCallFailed(f"POST {base}/sleep answered 404: Not Found", status=404)
        if level == 1 and not self.host_room:
            raise ReplicaCallFailed(
                f"POST {base}/sleep answered 500: cannot offload the weights to host memory",
                status=500,
                host_memory=True,
            )
        self.asleep.add(base)
        self.levels[base] = level

    async def wake_up(self, base: str, tags: tuple[str, ...] = ()) -> None:
        self.calls.append(("wake_up" + (":" + ",".join(tags) if tags else ""), base))
        if self.fail_wake:
            raise ReplicaCallFailed("boom")
        awake = {b for (b,) in [(c[1],) for c in self.calls]} - self.asleep
        if tags != ("kv_cache",) and len(awake - {base}) >= self.room:
            raise ReplicaCallFailed("CUDA out of memory", out_of_memory=True)
        if tags in ((), ("kv_cache",)):
            self.asleep.discard(base)

    async def reload_weights(self, base: str) -> None:
        self.calls.append(("reload_weights", base))

    async def warm_up(self, base: str) -> None:
        self.calls.append(("warm_up", base))

    async def is_sleeping(self, base: str) -> bool:
        return base in self.asleep


def pod(name: str, ip: str, node: str = "n1") -> PodInfo:
    return PodInfo(
        namespace="ml", name=name, labels={}, ip=ip, ready=True, terminating=False, node=node
    )


class Views(Mapping[str, ModelView]):
    """The models' views as the tier reads them, from what a test sets: each
    target's idle start (also its last use) and each pod's load."""

    def __init__(self) -> None:
        self.idle: dict[str, float | None] = {}
        self.used: dict[str, float | None] = {}
        self.load: dict[str, float] = {}

    def __getitem__(self, key: str) -> ModelView:
        idle = self.idle.get(key)
        used = self.used.get(key, idle)
        return ModelView(idle_since=idle, last_used=used, pod_load=self.load)

    def __iter__(self) -> Iterator[str]:
        return iter(self.idle)

    def __len__(self) -> int:
        return len(self.idle)


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def note(self, target: str, reason: str, message: str, warning: bool) -> None:
        self.seen.append((target, reason))


class World:
    def __init__(self, replicas: FakeReplicas) -> None:
        self.views = Views()
        self.idle = self.views.idle
        self.load = self.views.load
        self._events = Events()
        self.events = self._events.seen
        self.tier = WarmTier(
            replicas,
            clock=lambda: 0.0,
            views=self.views,
            events=self._events,
            settings=WarmSettings(handoff_s=HANDOFF_S),
        )


async def test_idle_replicas_sleep_after_the_handoff_and_busy_ones_do_not() -> None:
    replicas = FakeReplicas()
    w = World(replicas)
    pods = [pod("a-1", "10.0.0.1"), pod("a-2", "10.0.0.2")]
    w.idle["ml/a"] = 0.0
    w.load["a-2"] = 1.0
    assert w.tier.consider_sleep("ml/a", CONFIG, pods, now=10.0) == []  # not due yet
    assert w.tier.consider_sleep("ml/a", CONFIG, pods, now=30.0) == ["ml/a-1"]
    # Announced at once, asleep only after the handoff.
    assert w.tier.pool.not_routable() == {"ml/a": ["10.0.0.1:8000"]}
    assert replicas.calls == []
    await asyncio.sleep(PAST_HANDOFF_S)
    assert replicas.calls == [("sleep", "http://10.0.0.1:8000")]
    assert w.tier.pool.phase_of("ml/a-1") is Phase.SLEEPING
    assert w.events == [("ml/a", "Slept")]


async def test_replicas_beyond_the_count_awake_sleep_as_headroom_while_the_model_is_busy() -> None:
    replicas = FakeReplicas()
    w = World(replicas)
    pods = [pod("a-1", "10.0.0.1"), pod("a-2", "10.0.0.2"), pod("a-3", "10.0.0.3")]
    w.idle["ml/a"] = None  # busy: nothing sleeps for idleness
    w.load["a-1"] = 2.0
    assert w.tier.consider_sleep("ml/a", CONFIG, pods, now=5.0) == []
    assert w.tier.consider_sleep("ml/a", CONFIG, pods, now=5.0, awake_needed=3) == []
    # The load needs one awake: the two idle replicas beyond it sleep as headroom.
    assert w.tier.consider_sleep("ml/a", CONFIG, pods, now=5.0, awake_needed=1) == [
        "ml/a-2",
        "ml/a-3",
    ]
    w.load["a-3"] = 1.0  # work reached a-3 during its handoff: it stays awake
    await asyncio.sleep(PAST_HANDOFF_S)
    assert w.tier.pool.phase_of("ml/a-2") is Phase.SLEEPING
    assert w.tier.pool.phase_of("ml/a-3") is None


async def test_a_level_1_sleep_without_host_memory_sleeps_at_level_2() -> None:
    replicas = FakeReplicas()
    replicas.host_room = False
    w = World(replicas)
    w.idle["ml/a"] = 0.0
    assert w.tier.consider_sleep("ml/a", CONFIG, [pod("a-1", "10.0.0.1")], now=30.0) == ["ml/a-1"]
    await asyncio.sleep(PAST_HANDOFF_S)
    assert replicas.levels == {"http://10.0.0.1:8000": 2}
    assert w.tier.pool.phase_of("ml/a-1") is Phase.SLEEPING
    assert w.tier.pool.describe("ml/a")["pods"]["ml/a-1"]["level"] == 2
    # Its wake follows vLLM's level-2 sequence: the weights, reloaded, then the KV cache.
    outcome = await w.tier.wake("ml/a")
    assert outcome.woke == "ml/a-1"
    assert [c for c, _ in replicas.calls[-4:-1]] == [
        "wake_up:weights",
        "reload_weights",
        "wake_up:kv_cache",
    ]


async def test_a_server_without_sleep_mode_is_reported_once_and_not_asked_again() -> None:
    replicas = FakeReplicas()
    replicas.sleep_mode = False
    w = World(replicas)
    w.idle["ml/a"] = 0.0
    pods = [pod("a-1", "10.0.0.1")]
    for now in (30.0, 32.0, 34.0):  # ticks
        w.tier.consider_sleep("ml/a", CONFIG, pods, now=now)
        await asyncio.sleep(PAST_HANDOFF_S)
    assert replicas.calls == [("sleep", "http://10.0.0.1:8000")]
    assert w.events == [("ml/a", "SleepModeUnavailable")]
    assert w.tier.pool.not_routable() == {}  # back in rotation, awake
    said = w.tier.pool.describe("ml/a")["sleepModeUnavailable"]
    assert "ml/a-1" in said and "--enable-sleep-mode" in said
    # A new replica (say, after a rollout that enabled sleep mode) is asked.
    replicas.sleep_mode = True
    w.tier.consider_sleep("ml/a", CONFIG, [*pods, pod("a-2", "10.0.0.2")], now=36.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    assert replicas.calls[-1] == ("sleep", "http://10.0.0.2:8000")
    assert w.tier.pool.describe("ml/a")["sleepModeUnavailable"] is None
    assert w.events[-1] == ("ml/a", "Slept")


async def test_work_arriving_during_the_handoff_cancels_the_sleep() -> None:
    replicas = FakeReplicas()
    w = World(replicas)
    w.idle["ml/a"] = 0.0
    w.tier.consider_sleep("ml/a", CONFIG, [pod("a-1", "10.0.0.1")], now=30.0)
    w.idle["ml/a"] = None  # a request: the idle clock stopped
    await asyncio.sleep(PAST_HANDOFF_S)
    assert replicas.calls == []
    assert w.tier.pool.not_routable() == {}


async def test_level_one_wake_then_warm_up() -> None:
    replicas = FakeReplicas()
    w = World(replicas)
    w.idle["ml/a"] = 0.0
    w.tier.consider_sleep("ml/a", CONFIG, [pod("a-1", "10.0.0.1")], now=30.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    outcome = await w.tier.wake("ml/a")
    assert outcome.woke == "ml/a-1"
    assert replicas.calls[1:] == [
        ("wake_up", "http://10.0.0.1:8000"),
        ("warm_up", "http://10.0.0.1:8000"),
    ]
    assert w.tier.pool.not_routable() == {}
    assert w.tier.pool.describe("ml/a")["wakes"] == 1
    # Nothing left asleep: a second activation wakes nothing.
    assert (await w.tier.wake("ml/a")).reason == "nothing sleeps"


async def test_level_two_wake_follows_vllms_sequence() -> None:
    replicas = FakeReplicas()
    w = World(replicas)
    w.idle["ml/a"] = 0.0
    config = dataclasses.replace(CONFIG, sleep_level=2)
    w.tier.consider_sleep("ml/a", config, [pod("a-1", "10.0.0.1")], now=30.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    await w.tier.wake("ml/a")
    assert [c for c, _ in replicas.calls] == [
        "sleep", "wake_up:weights", "reload_weights", "wake_up:kv_cache", "warm_up",
    ]  # fmt: skip


async def test_a_wake_without_room_sleeps_the_lru_model_first() -> None:
    replicas = FakeReplicas(room=1)  # one model awake at a time besides the waker
    w = World(replicas)
    w.idle["ml/a"] = 0.0
    w.tier.consider_sleep("ml/a", CONFIG, [pod("a-1", "10.0.0.1")], now=30.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    b = pod("b-1", "10.0.0.2")
    w.tier.pool.remember("ml/b", CONFIG, [b])
    replicas.calls.append(("serve", "http://10.0.0.2:8000"))  # b is awake on the GPU
    outcome = await w.tier.wake("ml/a", lru=lambda node, target: [("ml/b", "ml/b-1", 1)])
    assert outcome.woke == "ml/a-1"
    assert outcome.evicted == ("ml/b-1",)
    assert w.tier.pool.phase_of("ml/b-1") is Phase.SLEEPING
    assert w.tier.pool.not_routable() == {"ml/b": ["10.0.0.2:8000"]}


async def test_a_wake_beside_a_busy_model_waits_for_it_to_finish() -> None:
    replicas = FakeReplicas(room=1)
    w = World(replicas)
    w.idle["ml/a"] = 0.0
    w.tier.consider_sleep("ml/a", CONFIG, [pod("a-1", "10.0.0.1")], now=30.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    b = pod("b-1", "10.0.0.2")
    w.tier.pool.remember("ml/b", CONFIG, [b])
    replicas.calls.append(("serve", "http://10.0.0.2:8000"))  # b is awake and busy
    busy = {"b": True}

    def lru(node: str | None, target: str) -> list[tuple[str, str, int]]:
        return [] if busy["b"] else [("ml/b", "ml/b-1", 1)]

    async def finish_b() -> None:
        await asyncio.sleep(3.0)  # b's request ends three seconds in
        busy["b"] = False

    loop = asyncio.get_running_loop()
    started = loop.time()
    _, outcome = await asyncio.gather(finish_b(), w.tier.wake("ml/a", lru=lru))
    assert (outcome.woke, outcome.evicted) == ("ml/a-1", ("ml/b-1",))
    assert 3.0 <= loop.time() - started < 3.0 + PAST_HANDOFF_S + 1.0
    # Busy for longer than busy_wait_s: the wake gives up (the caller cold-starts).
    w.idle["ml/a"] = 0.0
    w.tier.consider_sleep("ml/a", CONFIG, [pod("a-1", "10.0.0.1")], now=60.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    replicas.asleep.discard("http://10.0.0.2:8000")  # b awake again, and busy for good
    busy["b"] = True
    outcome = await w.tier.wake("ml/a", lru=lru)
    assert outcome.woke is None and "out of memory" in outcome.reason


async def test_a_failed_wake_leaves_it_asleep_and_says_why() -> None:
    replicas = FakeReplicas()
    w = World(replicas)
    w.idle["ml/a"] = 0.0
    w.tier.consider_sleep("ml/a", CONFIG, [pod("a-1", "10.0.0.1")], now=30.0)
    await asyncio.sleep(PAST_HANDOFF_S)
    replicas.fail_wake = True
    outcome = await w.tier.wake("ml/a")
    assert outcome.woke is None and "boom" in outcome.reason
    assert w.tier.pool.phase_of("ml/a-1") is Phase.SLEEPING
    assert ("ml/a", "WakeFailed") in w.events


async def test_a_new_leader_learns_who_sleeps_from_the_pods() -> None:
    replicas = FakeReplicas()
    replicas.asleep.add("http://10.0.0.1:8000")
    w = World(replicas)
    w.tier.reconcile("ml/a", CONFIG, [pod("a-1", "10.0.0.1"), pod("a-2", "10.0.0.2")])
    await asyncio.sleep(0.01)
    assert w.tier.pool.not_routable() == {"ml/a": ["10.0.0.1:8000"]}
    w.tier.pool.forget_missing("ml/a", [pod("a-2", "10.0.0.2")])
    assert w.tier.pool.not_routable() == {}
    await w.tier.close()


@pytest.mark.parametrize("busy", [True, False])
async def test_idle_awake_on_lists_other_idle_models_lru_first(busy: bool) -> None:
    w = World(FakeReplicas())
    w.idle.update({"ml/a": 5.0, "ml/b": 1.0, "ml/c": 3.0})
    if busy:
        w.load["b-1"] = 1.0
    pods = {
        "ml/a": [pod("a-1", "10.0.0.1")],
        "ml/b": [pod("b-1", "10.0.0.2")],
        "ml/c": [pod("c-1", "10.0.0.3"), pod("c-2", "10.0.0.4", node="n2")],
    }
    ranked = w.tier.choices.idle_awake_on("n1", exclude_target="ml/a", pods=pods)
    expected = (
        [(3.0, "ml/c", "ml/c-1")] if busy else [(1.0, "ml/b", "ml/b-1"), (3.0, "ml/c", "ml/c-1")]
    )
    assert ranked == expected


def test_lru_on_ranks_the_warm_tier_models_the_views_show() -> None:
    board = ModelBoard()
    a, b, c = pod("a-1", "10.0.0.1"), pod("b-1", "10.0.0.2"), pod("c-1", "10.0.0.3")
    board.publish("ml/a", ModelView(last_used=5.0, pods=(a,), sleep_level=1))
    board.publish("ml/b", ModelView(last_used=1.0, pods=(b,), sleep_level=2))
    # Not in the warm tier (no sleep-after): never put to sleep, however idle.
    board.publish("ml/c", ModelView(last_used=0.0, pods=(c,), sleep_level=None))
    tier = WarmTier(FakeReplicas(), clock=lambda: 0.0, views=board)
    assert tier.choices.lru_on("n1", "ml/x") == [("ml/b", "ml/b-1", 2), ("ml/a", "ml/a-1", 1)]
    assert tier.choices.lru_on("n1", "ml/b") == [("ml/a", "ml/a-1", 1)]
    # b, least recently used, comes back every 10 s; a every hour: a sleeps first.
    board.publish("ml/a", ModelView(last_used=5.0, pods=(a,), sleep_level=1, mean_gap_s=3600.0))
    board.publish("ml/b", ModelView(last_used=1.0, pods=(b,), sleep_level=2, mean_gap_s=10.0))
    assert tier.choices.lru_on("n1", "ml/x") == [("ml/a", "ml/a-1", 1), ("ml/b", "ml/b-1", 2)]
