"""How many replicas meet the objective: the model's history replayed as work, pure.

The history (:class:`~scaler.policy.slo.load.LoadHistory`) holds what
arrived per decision interval: prompt tokens, tokens to generate, requests,
and how many prompts were longer than each size bound. Each interval's load
becomes the replica-seconds it needs in both phases
(:meth:`~scaler.policy.slo.phases.PhaseFit.work_s`: prompt tokens at the
prefill rate, generated tokens at a full batch's cost, under an inter-token
objective when one is set), and :func:`replicas_for` replays it through a
fleet of ``n`` replicas (:mod:`scaler.policy.slo.replay`): prompts queue
for what decode leaves of the replicas, decode in progress must fit their
slots, and a request waits behind long prompts on its own replica
(:mod:`scaler.policy.slo.blocking`). The history's bursts, at their sizes
and lengths, are the forecast and its headroom: a burst short against the
objective is absorbed by the queue, a long one needs its rate in replicas.
The count is:

1. **the goal's**: the fewest ``n`` that keep all but half the allowed share
   of requests in time (the other half is left to cold starts and to error
   in the forecast);
2. **or fewer, at the knee** (:mod:`scaler.policy.slo.knee`), where the
   last replicas the goal takes stop buying attainment worth their
   GPU-hours over the last few cold starts' load: a tail of prompts no
   replica serves in time keeps the goal out of reach (every replica up to
   the ceiling still buys a little), or rare large bursts set it. The share
   of requests one more replica would meet is reported with the count;
3. **at least what drains a backlog** no replica there clears within a cold
   start.

How far back the replay looks follows the cold start expected: thirty cold
starts, at least ten minutes and at most thirty. Capacity that comes in a
minute must already be there when the next burst comes, and only a long
history says how large the bursts come; where the load has fallen by more
than the history's own noise explains, the replay is brought to the level
now (:mod:`scaler.policy.slo.level`), so that a day's decline lowers the
count within a few cold starts. A history too short to know the load's mean
(``settled``) may raise the count but not lower it.

Requests no replica can help: a prompt whose prefill alone, on an idle
replica at the learned rate, takes longer than the objective misses it
whatever the fleet. Such requests (counted from the prompt-size counters)
are late at every ``n``; they count against the miss allowance and buy
nothing. When they alone use it up, the goal is out of reach and the knee
decides: never the ceiling for a tail.

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
from operator import itemgetter

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS
from scaler.policy.slo.blocking import prompt_tail
from scaler.policy.slo.fleet_replay import FleetReplay
from scaler.policy.slo.knee import knee_window, recent_knee
from scaler.policy.slo.level import Raw, fallen_level, is_settled, releveled, stretches
from scaler.policy.slo.load import LOOKBACK_S, LoadHistory
from scaler.policy.slo.phases import PhaseFit
from scaler.policy.slo.replay import Step, decode_bound, steps

__all__ = [
    "Sizing",
    "SizingGoal",
    "hopeless_count",
    "hopeless_counter",
    "lookback_for",
    "replicas_for",
]

# The share of the miss allowance that sizing may spend (the rest: cold starts, error).
_SIZING_SHARE = 0.5
# The replicas asked for are kept, not added to, while they keep all but this
# many times the allowance in time (noise on a steady load is not demand).
_UP_SLACK = 1.5
# Which phase binds is told from the last minute's work (or a cold start's).
_BINDING_WINDOW_S = 60.0
# A prompt's own prefill takes at most this share of the objective when
# counting the wait a replica may add (a longer prompt cannot meet it anyway).
_MAX_SERVICE_SHARE = 0.75
# The replay's reach, in cold starts, and its bounds (the upper one is the
# history's own, LOOKBACK_S).
_LOOKBACK_COLD_STARTS = 30.0
_MIN_LOOKBACK_S = 600.0
# A ramp, not a burst: each of three windows (a third of a cold start, or of a
# shorter history, at least _MIN_TREND_WINDOW_S) above the last, the last at most _RAMP_AT_MOST
# times the first (a burst's own rise is steeper).
_MIN_TREND_WINDOW_S = 10.0
_RAMP_AT_MOST = 2.5
# ... and at least this much above the first (a steady load's thirds wander a
# few per cent, rising three times running one time in six).
_RAMP_AT_LEAST = 1.1


def lookback_for(cold_start_s: float) -> float:
    """How far back sizing replays the history for a cold start (module docstring)."""
    return min(LOOKBACK_S, max(_MIN_LOOKBACK_S, _LOOKBACK_COLD_STARTS * cold_start_s))


def hopeless_count(over: Sequence[float], threshold_tokens: float) -> float:
    """Arrivals with prompts longer than ``threshold_tokens``, from counts over each of
    :data:`PROMPT_SIZE_BOUNDS` (log-linear between two bounds; below the first, its
    count; past the last, none)."""
    return hopeless_counter(threshold_tokens)(over)


def hopeless_counter(threshold_tokens: float) -> Callable[[Sequence[float]], float]:
    """:func:`hopeless_count` at one threshold, for many intervals' counts (the bounds
    that bracket it found once)."""
    bounds = PROMPT_SIZE_BOUNDS
    width = len(bounds)
    if threshold_tokens <= bounds[0]:
        return lambda over: over[0] if over and len(over) == width else 0.0
    for i in range(width - 1):
        lo, hi = bounds[i], bounds[i + 1]
        if threshold_tokens <= hi:
            frac = math.log(threshold_tokens / lo) / math.log(hi / lo)

            def between(over: Sequence[float], i: int = i, frac: float = frac) -> float:
                if not over or len(over) != width or not over[i]:
                    return 0.0
                return over[i] + (over[i + 1] - over[i]) * frac

            return between
    return lambda over: 0.0


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
    cold_start_s: float = 60.0  # how long a replica asked for now takes to serve
    backlog: float = 0.0  # requests waiting for a first token now
    ready: int = 0  # replicas serving now (for what the replay predicts of them)
    # Replicas asked for, ready or starting: the first to take a backlog (a wake's).
    asked: int = 0
    recent_s: float = 0.0  # the window the attainment measured covers (0: none)
    # Where the search for the goal's count starts (the last decision's; 0: the
    # ceiling): the count is the same from anywhere, found in fewer replays near it.
    search_from: int = 0


@dataclass(frozen=True, slots=True)
class Sizing:
    replicas: int
    late_share: float  # the share of the history's requests that would wait too long
    why: str
    hopeless_share: float = 0.0  # the share whose prefill alone exceeds the objective
    binding: str = "prefill"  # the phase with the larger share of the work
    reachable: bool = True  # False: the hopeless requests alone exceed the allowance
    # The goal's own count where the knee stopped short of it (0: it did not).
    goal_replicas: int = 0
    # The share of the history's requests one more replica would meet besides.
    next_replica: float = 0.0
    rising: bool = False  # the load rose over the last cold start (a ramp, see _trend)
    # The history is long enough to know the load's mean within a quarter (see
    # _settled): until then it may raise the count but not lower it.
    settled: bool = True
    # The share of the last ``recent_s``'s requests the replay at the ready
    # replicas keeps within the objective (None: no request in it): what the
    # model says the servers should measure.
    predicted: float | None = None


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
    raw, hopeless = _work(history, goal, limit)
    # The replay at the load's level now, where it has fallen by more than its own
    # noise explains (a day's decline); its bursts keep their shape.
    level, recent_s = fallen_level(stretches(raw), goal.cold_start_s)
    if level != 1.0:
        raw, requests, hopeless = releveled(raw, level, recent_s, hopeless)
    series = steps(raw, goal.fit.answer_s(history.output_tokens / requests), goal.fit.slots)
    ahead = _trend(series, goal.cold_start_s, goal.fit.slots)
    series.extend(ahead)
    service_s = min(history.tokens / requests / p, _MAX_SERVICE_SHARE * goal.slo_ttft_s)
    wait_s = goal.slo_ttft_s - service_s
    allowed = (1.0 - goal.attainment) * _SIZING_SHARE * requests - hopeless
    top = max(1, goal.max_replicas)
    binding = _binding(raw, max(_BINDING_WINDOW_S, goal.cold_start_s))

    tail = prompt_tail(
        history.prompts_over, requests, history.tokens, prefill_per_s=p, slo_ttft_s=goal.slo_ttft_s
    )
    # The fewest replicas sizing expects to ask about: one below the last count, or
    # the knee's least (FleetReplay's floor).
    window = knee_window(series, goal.cold_start_s)
    last = goal.search_from - 1 if goal.search_from else top
    floor = max(1, min(top, math.ceil(window.load), last))
    replay = FleetReplay(series, wait_s, tail, floor=floor)
    cap = top
    found = None if allowed < 0 else _fewest(replay, allowed, top, goal.search_from)
    reachable = found is not None
    if found is not None:
        cap = found
        # A replica started must pay for its cold start: where the replicas asked
        # for already keep all but half again the allowance in time, noise in the
        # replay buys none.
        slack = _UP_SLACK * allowed
        if 0 < goal.asked < cap and replay.late(goal.asked, slack) <= slack:
            cap = goal.asked
    # The goal's count, or fewer where the last replicas it takes stop buying
    # attainment worth their GPU-hours over the load of the last few cold starts
    # (a tail no replica serves in time, bursts that a fleet a third larger
    # barely helps).
    lo = recent_knee(replay, window, attainment=goal.attainment, cap=cap)
    priced = reachable and lo < cap
    # Waiting requests no replica can serve in time are not worth draining.
    drain = _drain(
        series,
        goal.backlog * (1 - hopeless / requests),
        requests,
        goal.cold_start_s,
        max(goal.ready, goal.asked),
    )
    lo = min(top, max(lo, drain))
    share = (replay.late(lo) + hopeless) / requests
    next_replica = 0.0 if lo >= top else max(0.0, replay.late(lo) - replay.late(lo + 1)) / requests
    predicted = _predicted(history, replay, goal, limit)
    why = _why(history, goal, lo, share, hopeless, binding)
    if not reachable:
        why += " (goal out of reach: sized where one more replica buys less than it costs)"
    elif priced:
        why += f" (the goal takes {cap}: the replicas past {lo} buy less than they cost)"
    if ahead:
        why += "; the load is rising"
    settled = is_settled(series[: len(history.intervals)], goal.cold_start_s, goal.lookback_s)
    return Sizing(
        lo,
        share,
        why,
        hopeless_share=hopeless / requests,
        binding=binding,
        reachable=reachable,
        goal_replicas=cap if priced else 0,
        next_replica=next_replica,
        rising=bool(ahead),
        predicted=predicted,
        settled=settled,
    )


def _fewest(replay: FleetReplay, allowed: float, top: int, start: int) -> int | None:
    """The fewest replicas up to ``top`` whose replay keeps at most ``allowed`` requests
    late (None: not even ``top``). The late requests fall as replicas are added, so
    the count is the same however it is searched: by bisection without a ``start``
    (0), else outward from it (the last decision's count), which finds an unchanged
    count in two replays instead of six."""

    def meets(n: int) -> bool:
        return replay.late(n, allowed) <= allowed

    bad = 0  # a count known to miss (0: none below counts)
    if start <= 0:
        if not meets(top):
            return None
        good = top
    elif meets(start := min(start, top)):
        good, step = start, 1
        while good > 1:
            probe = max(1, good - step)
            if not meets(probe):
                bad = probe
                break
            good, step = probe, 2 * step
    else:
        bad, step = start, 1
        while True:
            if bad >= top:
                return None
            probe = min(top, bad + step)
            if meets(probe):
                good = probe
                break
            bad, step = probe, 2 * step
    while good - bad > 1:
        mid = (good + bad) // 2
        if meets(mid):
            good = mid
        else:
            bad = mid
    return good


def _why(
    history: LoadHistory, goal: SizingGoal, n: int, share: float, hopeless: float, binding: str
) -> str:
    """The sizing's reason: the count, what one replica does, what it keeps in time."""
    requests = history.requests
    learned = "learned" if goal.fit.trusted else "prior"
    g = goal.fit.decode_tokens_per_s(goal.slo_tpot_s)
    why = (
        f"{n} x ({goal.prefill_per_s:,.0f} prompt, {g:,.0f} generated tokens/s, {learned}; "
        f"{binding} binds) keep {100 * (1 - share):.1f} % of the last {history.span_s:.0f}s's "
        f"{requests:.0f} requests within the objective"
    )
    if hopeless > 0:
        why += f"; {100 * hopeless / requests:.1f} % have prompts no replica prefills in time"
    return why


def _work(history: LoadHistory, goal: SizingGoal, limit: float) -> tuple[list[Raw], float]:
    """Each interval as ``(seconds, prefill, decode, servable requests, arrivals)``
    (the work with the headroom), and the requests whose prompts are longer than
    ``limit`` tokens (no replica serves them in time)."""
    raw: list[Raw] = []
    hopeless = 0.0
    work_s = goal.fit.work_of(prefill_per_s=goal.prefill_per_s, slo_tpot_s=goal.slo_tpot_s)
    lost_of = hopeless_counter(limit)
    headroom = goal.headroom
    for start_s, end_s, tokens, count, output, over in history.intervals:
        pre, dec = work_s(tokens, output)
        lost = lost_of(over)
        lost = lost if lost < count else count
        hopeless += lost
        raw.append((end_s - start_s, pre * headroom, dec * headroom, count - lost, count))
    return raw, hopeless


def _binding(raw: Sequence[Raw], window_s: float) -> str:
    """The phase with the larger share of the last ``window_s`` seconds' work: what
    binds the load now (an hour-old phase of long prompts does not), prompts no
    replica serves in time left out (they buy no replica, so they bind nothing)."""
    prefill = decode = spent = 0.0
    for dt, pre, dec, servable, arrivals in reversed(raw):
        prefill += pre * (servable / arrivals if arrivals > 0 else 1.0)
        decode += dec
        spent += dt
        if spent >= window_s:
            break
    return "decode" if decode > prefill else "prefill"


def _predicted(
    history: LoadHistory, replay: FleetReplay, goal: SizingGoal, limit: float
) -> float | None:
    """The share of the last ``goal.recent_s``'s requests the replay at the ready
    replicas keeps within the objective (the hopeless ones miss; no request is
    taken as blocked behind a long prompt)."""
    if goal.recent_s <= 0 or goal.ready < 1 or not history.intervals:
        return None
    since = history.intervals[-1][1] - goal.recent_s
    first = next(i for i, interval in enumerate(history.intervals) if interval[1] > since)
    recent = history.intervals[first:]
    requests = sum(i[3] for i in recent)
    if requests <= 0:
        return None
    lost_of = hopeless_counter(limit)
    lost = sum(min(i[3], lost_of(i[5])) for i in recent)
    late = replay.late_between(goal.ready, first, len(history.intervals), blocked=False)
    return max(0.0, 1.0 - (late + lost) / requests)


def _window_rates(series: Sequence[Step], window_s: float, windows: int) -> list[float]:
    """The work (prefill and decode, replicas) per second of the last ``windows``
    stretches of ``window_s`` seconds, oldest first (fewer where the series is shorter)."""
    rates: list[float] = []
    work = spent = 0.0
    for step in reversed(series):
        work += step.prefill + step.decode * step.dt
        spent += step.dt
        if spent >= window_s:
            rates.append(work / spent)
            work = spent = 0.0
            if len(rates) == windows:
                break
    return rates[::-1]


def _trend(series: Sequence[Step], cold_start_s: float, slots: float) -> list[Step]:
    """The next cold start, where the load has risen over each of the last three
    thirds of a cold start, gently (a ramp: a burst of seconds does not rise
    three times running, nor so gently): the last third's load, plus the rise
    it is on, carried a cold start ahead."""
    # A history shorter than a cold start still shows a ramp in thirds of itself.
    span: float = sum(map(itemgetter(0), series))  # each step's dt, oldest first
    third = max(_MIN_TREND_WINDOW_S, min(cold_start_s, span) / 3)
    rates = _window_rates(series, third, 3)
    if len(rates) < 3 or not 0 < rates[0] < rates[1] < rates[2] <= _RAMP_AT_MOST * rates[0]:
        return []
    if rates[2] < _RAMP_AT_LEAST * rates[0]:
        return []  # three thirds in a row above the last: one time in six by chance
    requests = prefill = decode = spent = 0.0
    for step in reversed(series):
        requests += step.requests
        prefill += step.prefill
        decode += step.decode * step.dt
        spent += step.dt
        if spent >= third:
            break
    grow = (rates[2] + 1.5 * (rates[2] - rates[0])) / rates[2]
    scale = cold_start_s / spent * grow
    last = series[-1]
    level = decode / spent * grow
    return [
        Step(
            cold_start_s,
            prefill * scale,
            level,
            requests * scale,
            last.rate * grow,
            last.load * grow,
            decode_bound(level, slots),
        )
    ]


def _drain(
    series: Sequence[Step],
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
        sum(s.prefill + s.decode * s.dt for s in series) / sum(s.dt for s in series)
    ]
    # A request waiting for its first token waits for its prompt's work.
    work = backlog * sum(s.prefill for s in series) / requests
    spare = first - rates[-1]
    if spare > 0 and work / spare < cold_start_s:
        return 0
    return math.ceil(rates[-1] + work / cold_start_s)
