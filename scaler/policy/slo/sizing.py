"""How many replicas meet the objective: the model's history replayed as work, pure.

The history (:class:`~scaler.policy.slo.load.LoadHistory`) holds what
arrived per decision interval: prompt tokens, tokens to generate, requests,
and how many prompts were longer than each size bound. Each interval's load
becomes the replica-seconds it needs in both phases
(:meth:`~scaler.policy.slo.phases.PhaseFit.work_s`: prompt tokens at the
prefill rate, generated tokens at a full batch's cost, under an inter-token
objective when one is set), and :func:`replicas_for` replays it through a
fluid queue served at ``n`` replica-seconds per second: a request is late
when the work ahead of it takes longer than the objective less its own
prefill. The fewest ``n`` that keeps all but half the allowed share of
requests in time is the answer (the other half is left to cold starts and
to error in the forecast). The history's bursts, at their sizes and
lengths, are the forecast and its headroom: a burst short against the
objective is absorbed by the queue, a long one needs its rate in replicas.

How far back the replay looks follows the cold start expected: thirty cold
starts, at least a minute and at most ten. Capacity that comes in seconds
can follow demand closely and keeps little of what a burst long past asked
for; capacity that comes in a minute must already be there when the next
burst of the last ten minutes comes.

Requests no replica can help: a prompt whose prefill alone, on an idle
replica at the learned rate, takes longer than the objective misses it
whatever the fleet. Such requests (counted from the prompt-size counters)
are late at every ``n``; they count against the miss allowance and buy
nothing. When they alone use it up, the objective cannot be met, and the
count is the one of least expected cost instead: each miss priced as
:func:`~scaler.policy.idle.keep_alive.miss_price_s` prices it, each replica at its
GPU-seconds over the replay, so a replica is added only while the misses it
saves among the other requests are worth it. Never the ceiling for a tail.

Main decision, the measured attainment closes the loop through
``headroom``: the caller multiplies the work by it when the servers'
histograms show fewer first tokens in time than the sizing promised (see
:mod:`scaler.policy.slo.state`), so a model that is wrong about a server
buys its way back to the goal instead of reporting one figure beside
another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS
from scaler.policy.slo.load import LOOKBACK_S, LoadHistory
from scaler.policy.slo.phases import PhaseFit

__all__ = ["Sizing", "SizingGoal", "hopeless_count", "lookback_for", "replicas_for"]

# The share of the miss allowance that sizing may spend (the rest: cold starts, error).
_SIZING_SHARE = 0.5
# A prompt's own prefill takes at most this share of the objective when
# counting the wait a replica may add (a longer prompt cannot meet it anyway).
_MAX_SERVICE_SHARE = 0.75
# The replay's reach, in cold starts, and its bounds.
_LOOKBACK_COLD_STARTS = 30.0
_MIN_LOOKBACK_S = 60.0
# A ramp, not a burst: each of three windows (a third of a cold start, or of a
# shorter history, at least _MIN_TREND_WINDOW_S) above the last, the last at most _RAMP_AT_MOST
# times the first (a burst's own rise is steeper).
_MIN_TREND_WINDOW_S = 10.0
_RAMP_AT_MOST = 2.5


def lookback_for(cold_start_s: float) -> float:
    """How far back sizing replays the history for a cold start (module docstring)."""
    return min(LOOKBACK_S, max(_MIN_LOOKBACK_S, _LOOKBACK_COLD_STARTS * cold_start_s))


def hopeless_count(over: Sequence[float], threshold_tokens: float) -> float:
    """Arrivals with prompts longer than ``threshold_tokens``, from counts over each of
    :data:`PROMPT_SIZE_BOUNDS` (log-linear between two bounds; below the first, its
    count; past the last, none)."""
    if not over or len(over) != len(PROMPT_SIZE_BOUNDS):
        return 0.0
    bounds = PROMPT_SIZE_BOUNDS
    if threshold_tokens <= bounds[0]:
        return over[0]
    for i in range(len(bounds) - 1):
        lo, hi = bounds[i], bounds[i + 1]
        if threshold_tokens <= hi:
            frac = math.log(threshold_tokens / lo) / math.log(hi / lo)
            return over[i] + (over[i + 1] - over[i]) * frac
    return 0.0


@dataclass(frozen=True, slots=True)
class SizingGoal:
    """What sizing aims at and the capacity it has to do it with."""

    slo_ttft_s: float
    attainment: float
    max_replicas: int
    prefill_per_s: float  # prompt tokens per second one replica prefills
    fit: PhaseFit  # the step model: decode cost and the batch
    slo_tpot_s: float | None = None
    lookback_s: float = LOOKBACK_S
    headroom: float = 1.0  # work multiplier from the measured attainment
    miss_price_s: float = 6_000.0  # GPU-seconds one miss is worth
    cold_start_s: float = 60.0  # how long a replica asked for now takes to serve
    backlog: float = 0.0  # requests waiting for a first token now
    ready: int = 0  # replicas serving now (for what the replay predicts of them)
    # Replicas asked for, ready or starting: the first to take a backlog (a wake's).
    asked: int = 0
    recent_s: float = 0.0  # the window the attainment measured covers (0: none)


@dataclass(frozen=True, slots=True)
class Sizing:
    replicas: int
    late_share: float  # the share of the history's requests that would wait too long
    why: str
    hopeless_share: float = 0.0  # the share whose prefill alone exceeds the objective
    binding: str = "prefill"  # the phase with the larger share of the work
    reachable: bool = True  # False: the hopeless requests alone exceed the allowance
    rising: bool = False  # the load rose over the last cold start (a ramp, see _trend)
    # The share of the last ``recent_s``'s requests the replay at the ready
    # replicas keeps within the objective (None: no request in it): what the
    # model says the servers should measure.
    predicted: float | None = None


def _late(
    series: Sequence[tuple[float, float, float]],
    n: float,
    wait_s: float,
    stop_after: float,
    count_from: int = 0,
) -> float:
    """Requests a fluid queue served at ``n`` replica-seconds per second keeps waiting
    longer than ``wait_s`` over ``series`` of ``(seconds, work, requests)`` (counted
    from the interval ``count_from`` on; stops counting past ``stop_after``)."""
    threshold = n * wait_s
    backlog = late = 0.0
    for i, (dt, work, requests) in enumerate(series):
        if i < count_from:
            backlog = max(0.0, backlog + work - n * dt)
            continue
        rate = work / dt
        end = max(0.0, backlog + (rate - n) * dt)
        if requests > 0:
            if rate >= n:
                if end > threshold:
                    rise = end - backlog
                    share = 1.0 if rise <= 0 else min(1.0, (end - threshold) / rise)
                    late += requests * share
            elif backlog > threshold:
                late += requests * min(1.0, (backlog - threshold) / (n - rate) / dt)
            if late > stop_after:
                return late
        backlog = end
    return late


def replicas_for(history: LoadHistory, goal: SizingGoal) -> Sizing:
    """The replicas the history needs for ``goal`` (see the module docstring); 0 when
    the replay's reach holds no request."""
    if history.intervals:
        history = history.since(history.intervals[-1][1] - goal.lookback_s)
    requests = history.requests
    if requests <= 0:
        return Sizing(0, 0.0, f"no request in the last {goal.lookback_s:.0f}s")
    p = goal.prefill_per_s
    limit = p * goal.slo_ttft_s
    series: list[tuple[float, float, float]] = []
    pre_total = dec_total = hopeless = 0.0
    for start_s, end_s, tokens, count, output, over in history.intervals:
        pre, dec = goal.fit.work_s(tokens, output, prefill_per_s=p, slo_tpot_s=goal.slo_tpot_s)
        pre_total += pre
        dec_total += dec
        lost = min(count, hopeless_count(over, limit))
        hopeless += lost
        series.append((end_s - start_s, (pre + dec) * goal.headroom, count - lost))
    ahead = _trend(series, goal.cold_start_s)
    series.extend(ahead)
    service_s = min(history.tokens / requests / p, _MAX_SERVICE_SHARE * goal.slo_ttft_s)
    wait_s = goal.slo_ttft_s - service_s
    allowed = (1.0 - goal.attainment) * _SIZING_SHARE * requests - hopeless
    top = max(1, goal.max_replicas)
    binding = "decode" if dec_total > pre_total else "prefill"

    def late(n: int, stop: float = math.inf) -> float:
        return _late(series, float(n), wait_s, stop)

    reachable = allowed >= 0 and late(top, allowed) <= allowed
    if reachable:
        lo, hi = 1, top
        while lo < hi:
            mid = (lo + hi) // 2
            if late(mid, allowed) <= allowed:
                hi = mid
            else:
                lo = mid + 1
    else:
        lo = _least_cost(late, top, history.span_s, goal.miss_price_s)
    # Waiting requests no replica can serve in time are not worth draining.
    drain = _drain(
        series,
        goal.backlog * (1 - hopeless / requests),
        requests,
        goal.cold_start_s,
        max(goal.ready, goal.asked),
    )
    lo = min(top, max(lo, drain))
    share = (late(lo) + hopeless) / requests
    predicted = _predicted(history, series, goal, limit, wait_s)
    learned = "learned" if goal.fit.trusted else "prior"
    g = goal.fit.decode_tokens_per_s(goal.slo_tpot_s)
    why = (
        f"{lo} x ({p:,.0f} prompt, {g:,.0f} generated tokens/s, {learned}; {binding} binds) "
        f"keep {100 * (1 - share):.1f} % of the last {history.span_s:.0f}s's "
        f"{requests:.0f} requests within the objective"
    )
    if hopeless > 0:
        why += f"; {100 * hopeless / requests:.1f} % have prompts no replica prefills in time"
    if not reachable:
        why += " (goal out of reach: sized at least cost)"
    if ahead:
        why += "; the load is rising"
    return Sizing(lo, share, why, hopeless / requests, binding, reachable, bool(ahead), predicted)


def _predicted(
    history: LoadHistory,
    series: Sequence[tuple[float, float, float]],
    goal: SizingGoal,
    limit: float,
    wait_s: float,
) -> float | None:
    """The share of the last ``goal.recent_s``'s requests the replay at the ready
    replicas keeps within the objective (the hopeless ones miss)."""
    if goal.recent_s <= 0 or goal.ready < 1 or not history.intervals:
        return None
    since = history.intervals[-1][1] - goal.recent_s
    first = next(i for i, interval in enumerate(history.intervals) if interval[1] > since)
    recent = history.intervals[first:]
    requests = sum(i[3] for i in recent)
    if requests <= 0:
        return None
    lost = sum(min(i[3], hopeless_count(i[5], limit)) for i in recent)
    late = _late(series[: len(history.intervals)], float(goal.ready), wait_s, math.inf, first)
    return max(0.0, 1.0 - (late + lost) / requests)


def _window_rates(
    series: Sequence[tuple[float, float, float]], window_s: float, windows: int
) -> list[float]:
    """The work per second of the last ``windows`` stretches of ``window_s`` seconds,
    oldest first (fewer where the series is shorter)."""
    rates: list[float] = []
    work = spent = 0.0
    for dt, w, _ in reversed(series):
        work += w
        spent += dt
        if spent >= window_s:
            rates.append(work / spent)
            work = spent = 0.0
            if len(rates) == windows:
                break
    return rates[::-1]


def _trend(
    series: Sequence[tuple[float, float, float]], cold_start_s: float
) -> list[tuple[float, float, float]]:
    """The next cold start, where the load has risen over each of the last three
    thirds of a cold start, gently (a ramp: a burst of seconds does not rise
    three times running, nor so gently): the last third's rate and requests,
    plus the rise it is on, carried a cold start ahead."""
    # A history shorter than a cold start still shows a ramp in thirds of itself.
    span = sum(dt for dt, _, _ in series)
    third = max(_MIN_TREND_WINDOW_S, min(cold_start_s, span) / 3)
    rates = _window_rates(series, third, 3)
    if len(rates) < 3 or not 0 < rates[0] < rates[1] < rates[2] <= _RAMP_AT_MOST * rates[0]:
        return []
    last_requests = spent = 0.0
    for dt, _, count in reversed(series):
        last_requests += count
        spent += dt
        if spent >= third:
            break
    ahead = rates[2] + 1.5 * (rates[2] - rates[0])
    return [
        (
            cold_start_s,
            ahead * cold_start_s,
            last_requests / spent * cold_start_s * ahead / rates[2],
        )
    ]


def _drain(
    series: Sequence[tuple[float, float, float]],
    backlog: float,
    requests: float,
    cold_start_s: float,
    first: int,
) -> int:
    """Replicas that serve the last cold start's load and drain the requests waiting
    now within a cold start; 0 without a backlog, or where the ``first`` replicas (those
    asked for, ready or still starting) clear it within a cold start anyway: one asked
    for now would come after it is gone. A wake's backlog is sized so: the replicas
    starting take it, and what they could not clear asks for more."""
    if backlog < 1 or requests <= 0 or not series:
        return 0
    rates = _window_rates(series, cold_start_s, 1) or [
        sum(w for _, w, _ in series) / sum(dt for dt, _, _ in series)
    ]
    work = backlog * sum(w for _, w, _ in series) / requests
    spare = first - rates[-1]
    if spare > 0 and work / spare < cold_start_s:
        return 0
    return math.ceil(rates[-1] + work / cold_start_s)


def _least_cost(late: Callable[[int], float], top: int, span_s: float, miss_price_s: float) -> int:
    """The count of least expected cost over the replay: misses at their price plus
    each replica's GPU-seconds (the first of equals)."""
    best_n, best_cost = 1, math.inf
    for n in range(1, top + 1):
        missed = late(n)
        cost = missed * miss_price_s + n * span_s
        if cost < best_cost:
            best_n, best_cost = n, cost
        if missed <= 0:
            break
    return best_n
