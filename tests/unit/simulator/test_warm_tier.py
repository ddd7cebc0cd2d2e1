"""The warm tier on a pool of shared devices, against scale-to-zero alone (simulator.warm_tier).

Covers: a request after a sleep waits for a wake, not a cold start, and the
bill counts the device whole, split into starting, serving and
sleeping-only seconds (a sleep is announced for the scaler's handoff
first); wake and sleep times are the fake vLLM's; three models alternating
share one device only with the tier; a new pod on a full device puts the
least recently used to sleep (after the handoff); a new pod leaves room for
a sleeping one to wake; a wake blocked by a request about to finish waits
for it, one that cannot fit in time falls back to a cold start; a sleeper
stays asleep past its grace period on expected cost; a level-1 sleep that
the node's host memory cannot hold sleeps at level 2 and wakes in level 2's
time; a device of sleepers alone is emptied by moving its sleeper beside a
serving model (a replacement, then the old pod removed), after which its
request is a wake; bad configuration is refused; the runner and the CLI
carry the tier, with the bill's split in ``--json``.
"""

from __future__ import annotations

import json

import pytest

from loadtests.sandbox.servers.sleep_mode import WAKE_TAGS, SleepParams
from scaler.cli import main as tidal
from scaler.policy.protocol import InvalidTargetConfig
from scaler.policy.warm_tier import HANDOFF_S
from simulator.engine import LlmParams
from simulator.engine.sleep_timing import sleep_seconds, wake_seconds
from simulator.runner import SimulationOptions, run_policies
from simulator.traces import TraceRequest
from simulator.warm_tier import PoolConfig, run_pool
from simulator.world import ColdStart, WorldConfig

A = "autoscaling.tidal.dev/"
ZERO = {A + "scale-to-zero-grace-period": "10m"}
WARM = {**ZERO, A + "sleep-after": "60s", A + "sleep-level": "1"}
WORLD = WorldConfig(cold_start=ColdStart(60.0))
POOL = PoolConfig()  # two pods fit awake on a device
ENGINE = LlmParams()
WAKE_S = wake_seconds(POOL.weights_mib, 1, ("weights", "kv_cache"))


def req(at: float, model: str, prompt: int = 100, output: int = 1) -> TraceRequest:
    return TraceRequest(at, prompt, output, model)


def ttft(run_result: object, index: int) -> float:
    result = run_result.result  # type: ignore[attr-defined]
    first = result.first_token_s[index]
    assert first is not None
    return float(first - result.arrival_s[index])


def prefill(prompt: int = 100) -> float:
    return ENGINE.step_time_s(decoding=0, prefill_tokens=prompt)


def test_pool_defaults_fit_two_pods_awake() -> None:
    assert 2 * POOL.awake_mib <= POOL.gpu_memory_mib < 3 * POOL.awake_mib


def test_a_request_after_sleep_waits_for_a_wake_not_a_cold_start() -> None:
    trace = [req(0.0, "a"), req(300.0, "a")]  # idle 240 s: asleep, not gone
    warm = run_pool(trace, name="tidal-warm", annotations=WARM, world=WORLD)
    zero = run_pool(trace, name="tidal-pool", annotations=ZERO, world=WORLD)
    assert (warm.scorecard.cold_starts, warm.scorecard.wakes) == (1, 1)
    assert (zero.scorecard.cold_starts, zero.scorecard.wakes) == (1, 0)
    assert ttft(warm, 0) == pytest.approx(60.0 + prefill())
    warm_up = ENGINE.step_time_s(decoding=0, prefill_tokens=1)
    assert ttft(warm, 1) == pytest.approx(WAKE_S + warm_up + prefill())
    assert ttft(zero, 1) == pytest.approx(prefill())  # still awake within its grace period
    # The one device is held from 0 to the end of the run (the grace period outlasts
    # it): starting for the cold start, serving until its sleep is done (announced
    # for the handoff at 60 s idle, then the sleep call), sleeping-only until the
    # second request wakes it.
    card = warm.scorecard
    held = card.gpu_seconds_serving + card.gpu_seconds_sleeping_only + card.gpu_seconds_starting
    assert held == pytest.approx(card.gpu_seconds)
    assert card.gpu_seconds_starting == pytest.approx(60.0)
    asleep_at = 60.0 + prefill() + 60.0 + HANDOFF_S + sleep_seconds(POOL.weights_mib, 1)
    assert card.gpu_seconds_sleeping_only == pytest.approx(300.0 - asleep_at)
    assert zero.scorecard.gpu_seconds_sleeping_only == 0.0


def test_the_wake_time_is_the_fake_vllms() -> None:
    params = SleepParams(weights_mib=POOL.weights_mib)
    for level in (1, 2):
        tags = WAKE_TAGS
        assert params.wake_s(level, tags) == wake_seconds(POOL.weights_mib, level, tags)
        assert params.sleep_s(level) == sleep_seconds(POOL.weights_mib, level)
    assert 0.3 < WAKE_S < 3.0  # the sleep-mode post's range for a level-1 wake of an 8B model


def test_three_models_alternating_fit_one_gpu_only_with_the_tier() -> None:
    # a, b, c in turn every 100 s for an hour: never idle past the grace period.
    trace = sorted(
        (req(float(t), m) for i, m in enumerate("abc") for t in range(i * 100, 3600, 300)),
        key=lambda r: r.offset_s,
    )
    warm = run_pool(trace, name="tidal-warm", annotations=WARM, world=WORLD)
    zero = run_pool(trace, name="tidal-pool", annotations=ZERO, world=WORLD)
    assert zero.counts.peak_gpus == 2 and warm.counts.peak_gpus == 1
    assert warm.scorecard.gpu_seconds < zero.scorecard.gpu_seconds
    assert warm.scorecard.cold_starts == zero.scorecard.cold_starts == 3
    assert warm.counts.wakes > 0 and warm.counts.fallbacks == 0
    # Only the three cold starts miss the 2 s SLO: a wake fits within it.
    assert warm.scorecard.slo_attainment == zero.scorecard.slo_attainment < 1.0


def test_a_new_pod_on_a_full_gpu_puts_the_least_recently_used_to_sleep() -> None:
    late = {**ZERO, A + "scale-to-zero-grace-period": "30m", A + "sleep-after": "20m"}
    # a and b fill the GPU's memory awake; c arrives before either would sleep.
    trace = [req(0.0, "a"), req(10.0, "b"), req(200.0, "c"), req(400.0, "a")]
    warm = run_pool(trace, name="tidal-warm", annotations=late, world=WORLD)
    assert warm.counts.peak_gpus == 1
    # c's pod waits for a's sleep (a idle since 60 s, before b since 70 s); once
    # c is idle, b (idle longer) sleeps to keep room for a, whose next request
    # wakes without waiting for a sleep; once a is idle, one of a and c sleeps
    # to keep room for b: three evictions.
    assert (warm.counts.evictions, warm.counts.wakes) == (3, 1)
    evict = HANDOFF_S + sleep_seconds(POOL.weights_mib, 1)
    assert ttft(warm, 2) == pytest.approx(evict + 60.0 + prefill())
    warm_up = ENGINE.step_time_s(decoding=0, prefill_tokens=1)
    assert ttft(warm, 3) == pytest.approx(WAKE_S + warm_up + prefill())


def test_a_new_pod_goes_where_it_leaves_room_for_a_sleeping_one() -> None:
    # a sleeps from 120 s; b starts beside it at 100 s; c, at 130 s, would leave
    # a no room to wake beside two pods in their cold starts: it gets its own GPU.
    trace = [req(0.0, "a"), req(100.0, "b"), req(130.0, "c"), req(140.0, "a")]
    warm = run_pool(trace, name="tidal-warm", annotations=WARM, world=WORLD)
    assert (warm.counts.fallbacks, warm.counts.wakes, warm.counts.peak_gpus) == (0, 1, 2)
    warm_up = ENGINE.step_time_s(decoding=0, prefill_tokens=1)
    assert ttft(warm, 3) == pytest.approx(WAKE_S + warm_up + prefill())


def _three_on_one_gpu(c_output: int) -> list[TraceRequest]:
    # a and b start together, sleep from about 121 s; c joins them (room is left
    # for a wake) and sleeps from about 271 s. Then b and c wake into long or
    # short requests and a is asked for while they run.
    return [
        req(0.0, "a"),
        req(1.0, "b"),
        req(150.0, "c"),
        req(400.0, "b", output=20_000),
        req(401.0, "c", output=c_output),
        req(402.0, "a"),
    ]


def test_a_wake_blocked_by_a_request_about_to_finish_waits_for_it() -> None:
    warm = run_pool(_three_on_one_gpu(50), name="tidal-warm", annotations=WARM, world=WORLD)
    assert warm.counts.peak_gpus == 1
    assert (warm.counts.fallbacks, warm.counts.waited, warm.counts.wakes) == (0, 1, 3)
    c_done = warm.result.finished_s[4]
    assert c_done is not None
    warm_up = ENGINE.step_time_s(decoding=0, prefill_tokens=1)
    evict = HANDOFF_S + sleep_seconds(POOL.weights_mib, 1)
    expected = (c_done - 402.0) + evict + WAKE_S + warm_up + prefill()
    assert ttft(warm, 5) == pytest.approx(expected)


def test_a_wake_that_cannot_fit_in_time_falls_back_to_a_cold_start() -> None:
    # b and c both serve for minutes: waiting would cost more than a cold start.
    warm = run_pool(_three_on_one_gpu(20_000), name="tidal-warm", annotations=WARM, world=WORLD)
    assert (warm.counts.fallbacks, warm.counts.wakes) == (1, 2)
    assert ttft(warm, 5) == pytest.approx(60.0 + prefill())


def test_a_released_replica_sleeps_on_instead_of_going_to_zero() -> None:
    # a is used every 2 minutes for half an hour, then once more after 20 minutes:
    # past its 10-minute grace period it is still asleep, and wakes.
    trace = [req(float(t), "a") for t in range(0, 1800, 120)] + [req(1680.0 + 1200.0, "a")]
    warm = run_pool(trace, name="tidal-warm", annotations=WARM, world=WORLD)
    zero = run_pool(trace, name="tidal-pool", annotations=ZERO, world=WORLD)
    assert (warm.scorecard.cold_starts, zero.scorecard.cold_starts) == (1, 2)
    warm_up = ENGINE.step_time_s(decoding=0, prefill_tokens=1)
    assert ttft(warm, len(trace) - 1) == pytest.approx(WAKE_S + warm_up + prefill())


def test_a_sleep_the_hosts_memory_cannot_hold_is_at_level_2() -> None:
    # The node's RAM holds one model's weights: a sleeps at level 1, b at level 2,
    # and b's wake reloads its weights (level 2's time).
    pool = PoolConfig(host_memory_mib=POOL.weights_mib + 1_000)
    trace = [req(0.0, "a"), req(0.5, "b"), req(400.0, "b")]
    warm = run_pool(trace, name="tidal-warm", annotations=WARM, world=WORLD, pool=pool)
    assert warm.counts.level2_sleeps == 1
    warm_up = ENGINE.step_time_s(decoding=0, prefill_tokens=1)
    level2 = wake_seconds(POOL.weights_mib, 2, ("weights", "kv_cache"))
    assert ttft(warm, 2) == pytest.approx(level2 + warm_up + prefill())


def test_a_device_of_sleepers_alone_is_emptied_beside_a_serving_model() -> None:
    # Three fit awake on a device here: a (asked for every 10 s), b and c share the
    # first device; d, the fourth, starts on a second, and once asleep alone there
    # it moves beside a as a cluster moves a pod (a replacement, then the old pod
    # removed); its next request is a wake on the first device, not a cold start.
    pool = PoolConfig(kv_cache_tokens=50_000)
    trace = sorted(
        [req(float(t), "a") for t in range(0, 1800, 10)]
        + [req(0.5, "b"), req(1.0, "c"), req(1.5, "d"), req(1500.0, "d")],
        key=lambda r: r.offset_s,
    )
    warm = run_pool(trace, name="tidal-warm", annotations=WARM, world=WORLD, pool=pool)
    assert (warm.counts.peak_gpus, warm.counts.moves, warm.counts.emptied) == (2, 1, 1)
    assert warm.scorecard.cold_starts == 4  # a move is not a cold start: d never went to zero
    second = min(warm.result.replicas, key=lambda life: life.ended_s)
    assert second.created_s == 1.5 and second.ended_s < 300.0
    warm_up = ENGINE.step_time_s(decoding=0, prefill_tokens=1)
    later = next(i for i, r in enumerate(trace) if r.model == "d" and r.offset_s == 1500.0)
    assert ttft(warm, later) == pytest.approx(WAKE_S + warm_up + prefill())


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="MiB awake"):
        PoolConfig(kv_cache_tokens=1_000_000)
    with pytest.raises(ValueError, match="time-sliced"):
        PoolConfig(slices=0)
    with pytest.raises(InvalidTargetConfig, match="sleep-after"):
        run_pool([req(0.0, "a")], name="x", annotations={A + "sleep-after": "20m"}, world=WORLD)


def test_the_runner_adds_the_pool_policies_only_when_asked() -> None:
    trace = [req(0.0, "a"), req(300.0, "a"), req(20.0, "b")]
    default = run_policies(trace, SimulationOptions(policies=("tidal",)))
    assert [r.scorecard.name for r in default] == ["tidal"]
    options = SimulationOptions(
        policies=("tidal-pool", "tidal-warm"),
        # Set for every Tidal policy: tidal-pool stays scale-to-zero alone all the same.
        tidal_annotations={A + "sleep-after": "30s"},
    )
    pool, warm = run_policies(trace, options)
    assert (pool.scorecard.name, pool.scorecard.wakes) == ("tidal-pool", 0)
    assert (warm.scorecard.name, warm.scorecard.wakes) == ("tidal-warm", 1)
    with pytest.raises(ValueError, match="tidal-warm"):
        SimulationOptions(policies=("tidal-cold",))


def test_tidal_simulate_prints_the_tier_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = tidal(
        [
            "simulate",
            "--trace",
            "synthetic:many-models",
            "--synthetic-duration",
            "20m",
            "--synthetic-models",
            "30",
            "--policies",
            "tidal-pool,tidal-warm",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    pool, warm = data["policies"]
    assert (pool["name"], warm["name"]) == ("tidal-pool", "tidal-warm")
    assert pool["wakes"] == 0 and pool["gpu_seconds_sleeping_only"] == 0
    assert warm["wakes"] > 0
    for card in (pool, warm):
        held = card["gpu_seconds_serving"] + card["gpu_seconds_sleeping_only"]
        held += card["gpu_seconds_starting"]
        assert held == pytest.approx(card["gpu_seconds"], abs=0.01)
        assert card["gpu_seconds_starting"] > 0


def test_a_bad_sleep_after_is_refused_with_the_annotations_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = tidal(
        [
            "simulate",
            "--trace",
            "synthetic:many-models",
            "--synthetic-duration",
            "10m",
            "--policies",
            "tidal-warm",
            "--sleep-after",
            "10m",  # not shorter than the default 5m grace period
        ]
    )
    assert code == 2
    assert "sleep-after" in capsys.readouterr().err
