"""Scenario tests: one target driven through real windows and ``decide`` on a simulated clock.

Covers (defaults of docs/annotations.md unless a row says otherwise: target 16
concurrency per replica, 60 s window, 6 s panic window, 200 % panic
threshold, 60 s scale-down delay, down rate 2, 5 min grace, pods ready 30 s
after they are asked for, a decision every 2 s):

- cold start: the first request at zero wakes the target in that same
  decision (not at the next tick), to initial-scale; a burst at zero is a
  backlog while none is ready (scaler.policy.wake_backlog) and grows to its
  size through panic a tick after the first replicas are;
- burst and panic: panic starts within a tick or two of a 10x burst, scales
  to max-scale, never scales down while panicking, and holds at least a
  stable window after the burst; then the scale comes back down;
- slow decline: the scale only ever goes down, one rate-limited and delayed
  step at a time, and reaches zero exactly one grace period after the load
  stops;
- flapping load: on/off load every 20 s does not make the scale flap, and
  never drops it to zero;
- missing metrics: a source outage keeps the scale (NoData) however low the
  real load is, and the grace period restarts when data returns; a signal
  that never arrives (KV cache while loading) does not stop another fresh
  signal from raising the scale, but forbids lowering it;
- scale to zero and back: zero exactly at the end of the grace period, with
  ``recheck_after_s`` pointing at it while holding; then a new request wakes
  it at once; min-scale keeps it above zero; a zero grace period and delay
  drop it at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pytest

from scaler.policy import Mode, Reason
from simulator.harness import Sim, config, steps


@dataclass(frozen=True)
class Check:
    what: str
    ok: Callable[[Sim], bool]


def _square(high: float, *, start_s: float, half_period_s: float) -> Callable[[float], float]:
    def load(t: float) -> float:
        if t < start_s:
            return 0.0
        return high if int((t - start_s) // half_period_s) % 2 == 0 else 0.0

    return load


def _linear_decline(t: float) -> float:
    return max(0.0, 160.0 * (1.0 - t / 600.0))


def _non_increasing(values: list[int]) -> bool:
    return all(b <= a for a, b in itertools.pairwise(values))


def _downsteps_respect_rate(sim: Sim) -> bool:
    # desired >= ready / rate (per decision), rate 2 by default.
    return all(
        e.decision.desired >= -(-e.ready // 2)
        for e in sim.log
        if e.decision.desired < e.spec_before and e.decision.desired > 0
    )


def _min_gap_between_downsteps(sim: Sim) -> float:
    downs = [e.at_s for e in sim.log if 0 < e.decision.desired < e.spec_before]
    return min((b - a for a, b in itertools.pairwise(downs)), default=float("inf"))


def _first_zero_after(sim: Sim, after_s: float) -> float:
    return sim.first(lambda e: e.decision.desired == 0, after_s=after_s).at_s


SCENARIOS = [
    pytest.param(
        partial(Sim, load=steps((11, 4))),
        30,
        [
            Check("nothing before the first request", lambda s: s.desired(0, 10) == [0] * 6),
            Check(
                "woken at t=11 itself (an odd second: no tick), to initial-scale 1",
                lambda s: (
                    (s.at(11).decision.desired, s.at(11).decision.reason) == (1, Reason.ACTIVATED)
                ),
            ),
            Check("stays at 1", lambda s: set(s.desired(12, 30)) == {1}),
        ],
        id="cold-start: first request wakes in the same decision",
    ),
    pytest.param(
        partial(Sim, config=config(initial_scale=3), load=steps((11, 4))),
        12,
        [
            Check(
                "woken straight to initial-scale 3",
                lambda s: s.at(11).decision.desired == 3,
            ),
        ],
        id="cold-start: wakes to initial-scale",
    ),
    pytest.param(
        partial(Sim, load=steps((11, 100))),
        60,
        [
            Check("woken at t=11", lambda s: s.at(11).decision.reason is Reason.ACTIVATED),
            Check(
                "what is held while none is ready asks for nothing more",
                lambda s: set(s.desired(11, 40)) == {s.at(11).decision.desired},
            ),
            Check(
                "ceil(100/16) = 7 a tick after the first replicas are ready (41 s), in panic",
                lambda s: (s.at(42).decision.desired, s.at(42).decision.mode) == (7, Mode.PANIC),
            ),
            Check("never above 7", lambda s: max(s.desired(0, 60)) == 7),
        ],
        id="cold-start: a burst at zero is a backlog until a replica serves, then grows",
    ),
    pytest.param(
        partial(Sim, spec=1, load=steps((0, 16), (120, 160), (240, 16))),
        900,
        [
            Check("one replica before the burst", lambda s: set(s.desired(0, 118)) == {1}),
            Check("panic within two ticks", lambda s: s.at(122).decision.mode is Mode.PANIC),
            Check("at max-scale 10 within 10 s", lambda s: s.at(130).decision.desired == 10),
            Check(
                "never scales down while in panic",
                lambda s: _non_increasing(
                    [-e.decision.desired for e in s.log if e.decision.mode is Mode.PANIC]
                ),
            ),
            Check(
                "holds 10 for at least a stable window after the burst ends",
                lambda s: set(s.desired(240, 300)) == {10},
            ),
            Check("back to one replica", lambda s: s.at(900).decision.desired == 1),
            Check("every step down respects the down rate", _downsteps_respect_rate),
        ],
        id="burst and panic",
    ),
    pytest.param(
        partial(Sim, spec=10, load=_linear_decline),
        1000,
        [
            Check("never goes up", lambda s: _non_increasing(s.desired(0, 1000))),
            Check("every step down respects the down rate", _downsteps_respect_rate),
            Check(
                "each step down comes at least the scale-down delay after the previous one",
                lambda s: _min_gap_between_downsteps(s) >= 58,
            ),
            Check(
                "zero exactly one grace period after the load stops (t=600)",
                lambda s: _first_zero_after(s, 0) == 900,
            ),
        ],
        id="slow decline",
    ),
    pytest.param(
        partial(Sim, load=_square(48.0, start_s=10, half_period_s=20)),
        700,
        [
            Check("wakes and climbs to 3", lambda s: max(s.desired(0, 60)) == 3),
            Check(
                "settles at the average (24 -> 2) and stays there: at most one change after 60 s",
                lambda s: (
                    sum(
                        1
                        for a, b in itertools.pairwise(s.log)
                        if a.at_s >= 60 and a.decision.desired != b.decision.desired
                    )
                    <= 1
                    and s.at(700).decision.desired == 2
                ),
            ),
            Check("never to zero", lambda s: 0 not in s.desired(10, 700)),
        ],
        id="flapping load",
    ),
    pytest.param(
        partial(Sim, spec=3, load=steps((0, 48), (300, 0)), outage=lambda t: 200 <= t < 500),
        900,
        [
            Check("never below 3 while data is missing", lambda s: min(s.desired(0, 500)) == 3),
            Check(
                "the reason says NoData during the outage",
                lambda s: {e.decision.reason for e in s.between(210, 498)} == {Reason.NO_DATA},
            ),
            Check(
                "zero one full grace period after the data returns (t=500), not before",
                lambda s: _first_zero_after(s, 0) == 800,
            ),
        ],
        id="missing metrics: outage keeps the scale",
    ),
    pytest.param(
        partial(
            Sim,
            config=config(target_kv_cache_utilization=0.5),
            load=steps((10, 16), (100, 64), (300, 0)),
            kv_outage=lambda t: True,
        ),
        900,
        [
            Check(
                "concurrency (fresh) raises to 4 though the KV signal never arrived",
                lambda s: max(s.desired(0, 300)) == 4,
            ),
            Check("never lowered without the KV signal", lambda s: min(s.desired(106, 900)) == 4),
            Check(
                "NoData names the missing signal",
                lambda s: (
                    "kv_cache_utilization" in s.at(900).decision.message
                    and s.at(900).decision.reason is Reason.NO_DATA
                ),
            ),
        ],
        id="missing metrics: a never-arriving signal blocks lowering only",
    ),
    pytest.param(
        partial(Sim, load=steps((10, 16), (60, 0), (501, 16))),
        520,
        [
            Check("woken at t=10", lambda s: s.at(10).decision.reason is Reason.ACTIVATED),
            Check("zero at 60 + 300 s exactly", lambda s: _first_zero_after(s, 11) == 360),
            Check(
                "holding before that, with a recheck at the grace period's end",
                lambda s: (
                    (s.at(300).decision.reason, s.at(300).decision.recheck_after_s)
                    == (Reason.HOLDING, 60.0)
                ),
            ),
            Check(
                "a new request at t=501 wakes it at once",
                lambda s: (
                    (s.at(501).decision.desired, s.at(501).decision.reason) == (1, Reason.ACTIVATED)
                ),
            ),
        ],
        id="scale to zero and back",
    ),
    pytest.param(
        partial(Sim, config=config(min_scale=2), load=steps((10, 16), (60, 0))),
        1000,
        [
            Check("raised to min-scale at once", lambda s: s.at(0).decision.desired == 2),
            Check("never below min-scale", lambda s: min(s.desired(0, 1000)) == 2),
        ],
        id="min-scale keeps it above zero",
    ),
    pytest.param(
        partial(
            Sim,
            config=config(scale_to_zero_grace_s=0.0, scale_down_delay_s=0.0),
            load=steps((10, 16), (61, 0)),
        ),
        70,
        [
            Check("zero at the first tick without load", lambda s: _first_zero_after(s, 11) == 62),
        ],
        id="zero grace period and no delay drop at once",
    ),
]


@pytest.mark.parametrize(("make_sim", "until_s", "checks"), SCENARIOS)
def test_scenario(make_sim: Callable[[], Sim], until_s: float, checks: list[Check]) -> None:
    sim = make_sim().run(until_s)
    failed = [check.what for check in checks if not check.ok(sim)]
    assert not failed, f"failed: {failed}\n{sim.summary()}"
