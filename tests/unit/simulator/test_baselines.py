"""The baselines behave as their documentation says (simulator.baselines).

Covers:
- HPA: ceil(current x metric / target) at the 15 s sync only; no change
  within the 10 % tolerance; scale-up capped at +100 % or +4 per period;
  the 300 s scale-down stabilization (highest recommendation wins); never
  below one replica; not-ready pods count as using nothing when scaling up;
- KEDA + HTTP add-on: 0 -> 1 at once on activity (push scaler), HPA above
  one, back to zero only at a poll after the 300 s cooldown;
- Knative KPA: 2 s ticks on the 60 s stable average; panic on the 6 s window
  at 200 % and no scale-down while in panic; scale to zero only after the
  30 s grace period once zero is wanted; the activator's poke wakes it;
- KEDA sizes on its External metric against the replicas asked for, so it
  scales while the first replica is still starting;
- Knative rounds both windows to whole pods before the panic test, takes the
  larger of the panic and stable counts in panic, and with a scale-down
  delay keeps the highest count of the delay;
- always-on never changes; RecentMean forgets samples older than its window.
"""

from __future__ import annotations

import pytest

from simulator.baselines import (
    AlwaysOn,
    Hpa,
    Keda,
    Knative,
    RecentMean,
)
from simulator.world import View


def view(
    now: float,
    *,
    ready: int = 1,
    spec: int | None = None,
    concurrency: float = 0.0,
    held: int = 0,
    in_flight: int | None = None,
) -> View:
    flight = round(concurrency) if in_flight is None else in_flight
    return View(
        now=now,
        ready=ready,
        spec=ready if spec is None else spec,
        concurrency=concurrency,
        busy=concurrency > 0 or held > 0,
        held=held,
        in_flight=flight,
    )


def drive(
    policy: Hpa | Keda | Knative, start: float, end: float, **kwargs: float
) -> list[int | None]:
    """Tick once per second from start to end (inclusive) with a constant view."""
    out = []
    t = start
    while t <= end:
        out.append(policy.tick(view(t, **kwargs), activation=False))  # type: ignore[arg-type]
        t += 1
    return out


# --- HPA --------------------------------------------------------------------------------


def test_hpa_decides_only_every_15_seconds_on_the_period_mean() -> None:
    hpa = Hpa(target=10, max_replicas=20)
    assert hpa.tick(view(0, concurrency=30), activation=False) == 3  # ceil(1 x 30/10)
    # Between syncs: no decision.
    assert drive(hpa, 1, 14, ready=3, concurrency=30) == [None] * 14
    assert hpa.tick(view(15, ready=3, concurrency=30), activation=False) == 3


def test_hpa_tolerance_keeps_the_count_within_ten_percent() -> None:
    hpa = Hpa(target=10, max_replicas=20)
    # 2 ready at 21.5 total: ratio 1.075, within 10 %: unchanged.
    assert hpa.tick(view(0, ready=2, concurrency=21.5), activation=False) == 2
    hpa = Hpa(target=10, max_replicas=20)
    assert hpa.tick(view(0, ready=2, concurrency=23), activation=False) == 3


def test_hpa_scale_up_is_capped_at_double_or_plus_four() -> None:
    hpa = Hpa(target=1, max_replicas=100)
    assert hpa.tick(view(0, ready=1, concurrency=50), activation=False) == 5  # 1 + 4
    hpa = Hpa(target=1, max_replicas=100)
    assert hpa.tick(view(0, ready=10, concurrency=500), activation=False) == 20  # 2 x 10


def test_hpa_scale_down_waits_for_the_300_second_stabilization() -> None:
    hpa = Hpa(target=10, max_replicas=20)
    assert hpa.tick(view(0, ready=4, concurrency=40), activation=False) == 4
    drive(hpa, 1, 14, ready=4, concurrency=0)
    # The load is gone, but the 4 recommended at t=0 holds for 300 s.
    decisions = {
        t: hpa.tick(view(t, ready=4, concurrency=0), activation=False) for t in range(15, 301)
    }
    synced = {t: d for t, d in decisions.items() if d is not None}
    assert all(d == 4 for t, d in synced.items() if t < 300)
    assert synced[300] == 1  # minReplicas 1: never zero


def test_hpa_counts_unready_pods_as_idle_when_scaling_up() -> None:
    hpa = Hpa(target=10, max_replicas=20)
    # 1 ready carrying 25, 2 more still starting: 25 / (10 x 3) < 1, no scale-up.
    assert hpa.tick(view(0, ready=1, spec=3, concurrency=25), activation=False) == 3
    hpa = Hpa(target=10, max_replicas=20)
    assert hpa.tick(view(0, ready=1, spec=3, concurrency=45), activation=False) == 5


def test_hpa_refuses_a_minimum_of_zero() -> None:
    with pytest.raises(ValueError, match="cannot scale to zero"):
        Hpa(target=1, max_replicas=2, min_replicas=0)


# --- KEDA -------------------------------------------------------------------------------


def test_keda_activates_at_once_and_returns_to_zero_after_the_cooldown() -> None:
    keda = Keda(target=10, max_replicas=20)
    assert keda.initial == 0
    assert keda.tick(view(5, ready=0, spec=0, held=1, in_flight=0), activation=True) == 1
    # Busy until t=100, then idle: zero at the first 30 s poll at or after 100 + 300.
    decisions = {}
    for t in range(6, 500):
        load = 5.0 if t <= 100 else 0.0
        decisions[t] = keda.tick(view(t, ready=1, concurrency=load), activation=False)
    zero_at = min(t for t, d in decisions.items() if d == 0)
    assert 400 <= zero_at < 430
    assert all(d != 0 for t, d in decisions.items() if t < 400)


def test_keda_uses_the_hpa_above_one() -> None:
    keda = Keda(target=10, max_replicas=20)
    keda.tick(view(0, ready=0, spec=0, held=1, in_flight=0), activation=True)
    assert keda.tick(view(1, ready=1, concurrency=40), activation=False) == 4


def test_keda_scales_during_the_cold_start_on_the_replicas_asked_for() -> None:
    keda = Keda(target=10, max_replicas=20)
    keda.tick(view(0, ready=0, spec=0, held=1, in_flight=0), activation=True)
    # One replica asked for, none ready yet, 40 requests held: the External
    # metric's AverageValue target wants ceil(40 / 10) = 4 now, not after the start.
    assert keda.tick(view(1, ready=0, spec=1, concurrency=40, held=40), activation=False) == 4


# --- Knative ----------------------------------------------------------------------------


def test_knative_panics_on_whole_pods() -> None:
    kpa = Knative(target=10, max_replicas=20)
    # 15 per second on one ready pod: 1.5 pods raw (under 200 %), but 2 whole
    # pods, which is 200 % of the one ready: autoscaler.go panics.
    drive(kpa, 0, 6, ready=1, spec=1, concurrency=15)
    assert kpa.panic_since is not None


def test_knative_in_panic_provisions_for_the_stable_window_too() -> None:
    kpa = Knative(target=10, max_replicas=20)
    # 54 s of 100, then 8 s of 25, on 10 ready pods (no panic: at most 100 %),
    # then only one pod ready: the panic window wants 3 pods (300 % of one:
    # panic) while the stable window still wants 9.
    drive(kpa, 0, 53, ready=10, spec=10, concurrency=100)
    drive(kpa, 54, 61, ready=10, spec=10, concurrency=25)
    out = [d for d in drive(kpa, 62, 63, ready=1, spec=10, concurrency=25) if d is not None]
    assert kpa.panic_since is not None
    assert out == [9]


def test_knative_scale_down_delay_keeps_the_highest_count_of_the_delay() -> None:
    kpa = Knative(target=10, max_replicas=20, scale_to_zero_grace_s=300, scale_down_delay_s=60)
    drive(kpa, 0, 9, ready=1, concurrency=5)
    decisions = {
        t: kpa.tick(view(t, ready=1, concurrency=0), activation=False) for t in range(10, 600)
    }
    zero_at = min(t for t, d in decisions.items() if d == 0)
    # Stable window empty at about 70 s, the delay keeps 1 until about 130 s,
    # then Tidal's 5 minutes of grace.
    assert 420 <= zero_at <= 440


def test_knative_scales_on_the_stable_average_every_two_seconds() -> None:
    kpa = Knative(target=10, max_replicas=20)
    # A steady 15 per second at one ready: stable wants 2; panic needs 20 per ready pod.
    out = drive(kpa, 0, 9, ready=1, spec=1, concurrency=15)
    assert out[0::2] == [2, 2, 2, 2, 2]
    assert out[1::2] == [None] * 5


def test_knative_panics_on_a_burst_and_does_not_scale_down_in_panic() -> None:
    kpa = Knative(target=10, max_replicas=50)
    drive(kpa, 0, 59, ready=1, concurrency=1)
    # A burst of 100: the 6 s panic window (mean 34 by t=62) crosses 2 x 10
    # per ready pod long before the 60 s stable window notices.
    burst = [d for d in drive(kpa, 60, 63, ready=1, concurrency=100) if d is not None]
    assert kpa.panic_since is not None
    high = max(burst)
    assert high >= 4  # ceil(34 / 10); the stable window alone would want 1
    # Load gone: in panic the count never drops below the highest seen.
    after = [d for d in drive(kpa, 62, 100, ready=high, concurrency=0) if d is not None]
    assert min(after) >= high


def test_knative_goes_to_zero_only_after_the_grace_period() -> None:
    kpa = Knative(target=10, max_replicas=20)
    drive(kpa, 0, 9, ready=1, concurrency=5)
    decisions = {}
    for t in range(10, 200):
        decisions[t] = kpa.tick(view(t, ready=1, concurrency=0), activation=False)
    zero_at = min(t for t, d in decisions.items() if d == 0)
    # The 60 s stable window empties at about t=70; then 30 s of grace.
    assert 95 <= zero_at <= 105
    assert kpa.tick(view(300, ready=0, spec=0, held=3, in_flight=0), activation=True) == 1


def test_always_on_never_changes() -> None:
    fleet = AlwaysOn(3)
    assert (fleet.initial, fleet.name) == (3, "always-on-3")
    assert fleet.tick(view(0, ready=3, concurrency=1000), activation=False) is None
    with pytest.raises(ValueError, match="at least 1"):
        AlwaysOn(0)


def test_recent_mean_forgets_old_samples() -> None:
    mean = RecentMean(3)
    for value in (9.0, 3.0, 3.0, 3.0):
        mean.add(value)
    assert mean.mean == 3.0
    with pytest.raises(ValueError, match="at least 1 s"):
        RecentMean(0.5)
