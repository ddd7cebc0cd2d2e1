"""Property tests: invariants of ``decide`` over random configs and random observation sequences.

Covers, for any valid config and any sequence of observations (replica
counts, readings fresh, stale or missing, busy or not, activations) fed
through the returned state with time moving forward:
- never above max-scale; never below min-scale; zero only when min-scale is 0;
- never to zero while busy (any activator holds or runs requests), and a
  busy target at zero always wakes;
- missing or stale data never lowers the scale (unless max-scale itself
  is below the current scale), and a stale demand source never lets it reach
  zero;
- an activation at zero wakes to at least initial-scale (bounded by max);
- in consecutive panic decisions the panic level never falls;
- decide is deterministic (same inputs, same outputs).
And the same bounds hold when the decisions run through real windows in
the simulator with random load.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.policy import (
    Demand,
    Mode,
    Observation,
    PolicyState,
    ScalingConfig,
    SignalKind,
    SignalReading,
    decide,
)
from simulator.harness import Sim

settings.register_profile("policy", max_examples=150, deadline=None)
settings.load_profile("policy")


@st.composite
def configs(draw: st.DrawFn) -> ScalingConfig:
    max_scale = draw(st.integers(1, 50))
    window_s = draw(st.sampled_from([6.0, 30.0, 60.0, 300.0]))
    return ScalingConfig(
        min_scale=draw(st.integers(0, max_scale)),
        max_scale=max_scale,
        initial_scale=draw(st.integers(1, max_scale)),
        target_concurrency=draw(st.sampled_from([0.5, 1.0, 4.0, 16.0])),
        target_queue_depth=draw(st.none() | st.sampled_from([1.0, 8.0])),
        target_kv_cache_utilization=draw(st.none() | st.sampled_from([0.5, 0.8])),
        target_gpu_utilization=draw(st.none() | st.sampled_from([0.3, 0.9])),
        window_s=window_s,
        panic_window_percentage=draw(st.sampled_from([1.0, 10.0, 100.0])),
        panic_threshold_percentage=draw(st.sampled_from([110.0, 200.0, 1000.0])),
        scale_down_delay_s=draw(st.sampled_from([0.0, 10.0, 60.0])),
        max_scale_up_rate=draw(st.sampled_from([1.1, 2.0, 1000.0])),
        max_scale_down_rate=draw(st.sampled_from([1.01, 2.0, 10.0])),
        scale_to_zero_grace_s=draw(st.sampled_from([0.0, 5.0, 30.0])),
    )


_values = st.floats(0, 500, allow_nan=False) | st.just(0.0)
_fractions = st.floats(0, 1, allow_nan=False)


@st.composite
def readings(draw: st.DrawFn, kind: SignalKind) -> SignalReading | None:
    values = (
        _fractions
        if kind in (SignalKind.KV_CACHE_UTILIZATION, SignalKind.GPU_UTILIZATION)
        else _values
    )
    if draw(st.integers(0, 9)) == 0:
        return None  # missing
    stable = draw(st.none() | values) if draw(st.booleans()) else draw(values)
    panic = draw(values) if stable is not None else None
    return SignalReading(stable=stable, panic=panic, fresh=draw(st.integers(0, 4)) > 0)


@dataclass(frozen=True)
class Step:
    dt_s: float
    ready: int
    spec: int
    signals: dict[SignalKind, SignalReading]
    busy: bool
    all_sources_fresh: bool
    activation: bool

    def observation(self) -> Observation:
        return Observation(
            ready_replicas=self.ready,
            spec_replicas=self.spec,
            signals=self.signals,
            demand=Demand(busy=self.busy, all_sources_fresh=self.all_sources_fresh),
            activation_requested=self.activation,
        )


@st.composite
def steps(draw: st.DrawFn, cfg: ScalingConfig) -> Step:
    spec = draw(st.integers(0, cfg.max_scale + 3))
    signals: dict[SignalKind, SignalReading] = {}
    for kind in SignalKind:  # unconfigured kinds too: they must be ignored
        r = draw(readings(kind))
        if r is not None:
            signals[kind] = r
    return Step(
        dt_s=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 7.0, 30.0, 120.0])),
        ready=draw(st.integers(0, spec + 1)),
        spec=spec,
        signals=signals,
        busy=draw(st.booleans()),
        all_sources_fresh=draw(st.integers(0, 3)) > 0,
        activation=draw(st.integers(0, 4)) == 0,
    )


@st.composite
def runs(draw: st.DrawFn) -> tuple[ScalingConfig, list[Step]]:
    cfg = draw(configs())
    return cfg, draw(st.lists(steps(cfg), min_size=1, max_size=40))


def _data_missing(cfg: ScalingConfig, step: Step) -> bool:
    for kind in cfg.configured_signals():
        r = step.signals.get(kind)
        if r is None or r.stable is None or not r.fresh:
            return True
    return False


@given(runs())
def test_invariants_over_random_runs(run: tuple[ScalingConfig, list[Step]]) -> None:
    cfg, sequence = run
    now = 1000.0
    state = PolicyState.initial(now - 5000 if len(sequence) % 2 else now)
    for step in sequence:
        now += step.dt_s
        obs = step.observation()
        decision, new_state = decide(config=cfg, observation=obs, state=state, now=now)
        again = decide(config=cfg, observation=obs, state=state, now=now)
        assert again == (decision, new_state), "decide must be deterministic"
        d = decision.desired
        context = f"{decision.reason}: {decision.message} ({step})"

        assert d <= cfg.max_scale, context
        assert d >= cfg.min_scale, context
        if d == 0:
            assert cfg.min_scale == 0, context
            assert not step.busy, "never to zero while busy: " + context
        if step.busy:
            assert d >= 1, context
        if step.spec > 0 and (_data_missing(cfg, step) or not step.all_sources_fresh):
            assert d != 0, "no zero on missing or stale data: " + context
        if _data_missing(cfg, step):
            assert d >= min(step.spec, cfg.max_scale), "missing data lowered: " + context
        if step.spec == 0 and step.activation:
            assert d >= min(max(cfg.initial_scale, cfg.min_scale), cfg.max_scale), context
        if state.mode is Mode.PANIC and decision.mode is Mode.PANIC:
            assert new_state.panic_desired >= state.panic_desired, context
        if decision.recheck_after_s is not None:
            assert decision.recheck_after_s > 0, context
        state = new_state


@given(
    load=st.lists(st.sampled_from([0.0, 0.0, 3.0, 16.0, 40.0, 200.0]), min_size=1, max_size=12),
    segment_s=st.sampled_from([5, 20, 90]),
    min_scale=st.integers(0, 2),
)
@settings(max_examples=25)
def test_bounds_through_real_windows(load: list[float], segment_s: int, min_scale: int) -> None:
    cfg = ScalingConfig(min_scale=min_scale, max_scale=6, scale_to_zero_grace_s=30.0)

    def load_at(t: float) -> float:
        return load[min(int(t // segment_s), len(load) - 1)]

    sim = Sim(config=cfg, load=load_at, cold_start_s=10.0).run(len(load) * segment_s + 60)
    for entry in sim.log:
        d = entry.decision.desired
        assert min_scale <= d <= 6, sim.summary()
        if entry.load > 0:
            assert d >= 1, "zero while busy\n" + sim.summary()
