"""The jumping engine against the step engine it replaces (simulator.engine.jump).

Covers: over steady, bursty, long-prompt, prefix-cached (prefix routing on
its own record of blocks, and on the engines' KV-cache events),
spot (interruptions and zones coming and going), many-model and
KV-preempting traffic, ``tidal``, a baseline and a fixed fleet score the
same with either stepper: every count identical (requests, completed,
failures by reason, cold starts, peak replicas, preemptions, SLO attainment,
which is a count of requests), GPU-seconds, busy time, latency
percentiles and prefix-cache hit rates within 0.1 % (the jump's step ends
are ``t0 + i x dt`` where the step engine adds ``dt`` once per step: the
last bits of a float). A jump in
flight cut by an arrival admits it where the step engine would, and the
server metrics the policy reads each second (tokens generated, sequences
running and waiting, KV usage) are the step engine's.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import pytest

from scaler.policy import PlacementConfig
from simulator.chat_trace import ChatSpec, generate_chat
from simulator.engine import LlmParams
from simulator.engine.jump import JumpEngine, StepEngine
from simulator.prefix_routing import balancer
from simulator.runner import SimulationOptions, run_policies
from simulator.scorecard import Scorecard, prefix_hit_rate
from simulator.synthetic import SyntheticSpec, generate
from simulator.traces import TraceRequest
from simulator.world import ColdStart, SpotModel, WorldConfig

EXACT = (
    "requests",
    "completed",
    "failed",
    "failed_by_reason",
    "cold_starts",
    "peak_replicas",
    "preemptions",
    "slo_attainment",
    "first_cold_start_missed",
    "wakes",
)
WORLD = WorldConfig(cold_start=ColdStart(20.0))
POLICIES = ("tidal", "hpa", "always-on-2")


def _synthetic(kind: str, seconds: float, per_min: float, **extra: object) -> list[TraceRequest]:
    return generate(
        SyntheticSpec(kind=kind, duration_s=seconds, requests_per_min=per_min, **extra)  # type: ignore[arg-type]
    )


def _scenarios() -> dict[str, tuple[list[TraceRequest], SimulationOptions]]:
    base = SimulationOptions(world=WORLD, max_replicas=4, policies=POLICIES)
    chat = generate_chat(ChatSpec(duration_s=90.0, conversations_per_s=1.5, seed=3))
    spot = SpotModel(rate_per_hour=20.0, notice_s=10.0, availability=0.6, changes_per_day=2000.0)
    small_kv = LlmParams(kv_cache_tokens=60_000, max_num_seqs=64)
    return {
        "steady": (_synthetic("bursts", 60.0, 900.0, gamma_shape=1.0, tokens="chat"), base),
        "bursty": (_synthetic("bursts", 120.0, 400.0, gamma_shape=0.3), base),
        "long-prompts": (_synthetic("long-context", 90.0, 90.0), base),
        "prefix-caching": (
            chat,
            replace(
                base,
                world=replace(
                    WORLD,
                    engine=LlmParams(prefix_block_tokens=16),
                    balancer=balancer("prefix", engine=LlmParams(prefix_block_tokens=16)),
                ),
            ),
        ),
        "prefix-caching-kv-events": (
            chat,
            replace(
                base,
                world=replace(
                    WORLD,
                    engine=LlmParams(prefix_block_tokens=16, kv_cache_tokens=40_000),
                    balancer=balancer(
                        "prefix", engine=LlmParams(prefix_block_tokens=16), exact=True
                    ),
                ),
            ),
        ),
        "spot": (
            _synthetic("bursts", 90.0, 600.0, gamma_shape=1.0, tokens="chat"),
            replace(
                base,
                world=replace(WORLD, spot=spot),
                spot_placement=PlacementConfig(policy="spot"),
            ),
        ),
        "many-models": (_synthetic("many-models", 300.0, 1.0, models=8, seed=2), base),
        "kv-preemption": (
            _synthetic("bursts", 60.0, 900.0, gamma_shape=1.0, tokens="chat"),
            replace(base, world=replace(WORLD, engine=small_kv)),
        ),
    }


SCENARIOS = _scenarios()


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-9)


def _differences(step: Scorecard, jump: Scorecard) -> dict[str, tuple[object, object]]:
    out: dict[str, tuple[object, object]] = {}
    for f in fields(Scorecard):
        a, b = getattr(step, f.name), getattr(jump, f.name)
        exact = f.name in EXACT or not isinstance(a, float)
        if not (a == b if exact else _close(a, b)):
            out[f.name] = (a, b)
    return out


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_both_steppers_give_the_same_scorecard(name: str) -> None:
    requests, options = SCENARIOS[name]
    cards = {}
    hits = {}
    for stepper in ("step", "jump"):
        world = replace(options.world, stepper=stepper)
        runs = run_policies(requests, replace(options, world=world))
        cards[stepper] = [r.scorecard for r in runs]
        hits[stepper] = [prefix_hit_rate(r.result) for r in runs if r.result is not None]
    assert all(_close(a, b) for a, b in zip(hits["step"], hits["jump"], strict=True))
    assert len(cards["step"]) == len(cards["jump"])
    for step, jump in zip(cards["step"], cards["jump"], strict=True):
        assert _differences(step, jump) == {}, step.name
    assert sum(c.completed for c in cards["jump"]) > 0


Seen = tuple[float, int, int, int, int]


def _drive(engine: JumpEngine | StepEngine, arrivals: list[tuple[float, int, int]]) -> list[Seen]:
    """Arrivals into one engine, as the world drives it; what is seen at each whole second."""
    seen: list[Seen] = []
    pending = sorted(arrivals)
    end: float | None = None
    tokens = 0
    second = 1.0
    now = 0.0
    request = 0
    while pending or engine.has_work or end is not None:
        nxt = min(t for t in (end, pending[0][0] if pending else None, second) if t is not None)
        now = nxt
        if end is not None and end <= now:
            tokens += engine.end_step().tokens
            end = engine.begin_step(now)
        elif pending and pending[0][0] <= now:
            at, prompt, output = pending.pop(0)
            engine.add(request, prompt_tokens=prompt, output_tokens=output, now=at)
            request += 1
            end = engine.begin_step(now) if end is None else (engine.cut(now) or end)
        else:
            tokens += engine.settle(now)
            kv = engine.kv.used
            seen.append((now, tokens, engine.num_running, engine.num_waiting, kv))
            tokens = 0
            second += 1.0
    return seen


def test_what_a_replica_shows_each_second_is_the_step_engines() -> None:
    params = LlmParams(kv_cache_tokens=30_000, max_num_seqs=8)
    arrivals = [(0.05 * i + 0.013, 500 + 37 * (i % 11), 20 + 53 * (i % 7)) for i in range(120)]
    step = _drive(StepEngine(params), arrivals)
    jump = _drive(JumpEngine(params), arrivals)
    assert len(step) == len(jump) > 10
    for a, b in zip(step, jump, strict=True):
        assert a[1:] == b[1:], a[0]
