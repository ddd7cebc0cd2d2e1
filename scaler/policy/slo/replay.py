"""The history replayed through a fleet of ``n`` replicas: who waits too long, pure.

Sizing (:mod:`scaler.policy.slo.sizing`) asks, for a candidate count ``n``,
how many of the history's requests would have waited past the objective.
Each decision interval of the history is one :class:`Step`: its prompt
work (replica-seconds of prefill), the decode in progress (replicas busy
decoding, smoothed) and its requests. Two things make a request late:

- **prefill**: the prompt work ahead of it. Prompts queue in a fluid queue
  served at what the replicas have left after decode, ``n - decode``; a
  request is late when the work ahead of it takes longer than its wait
  allowance (the objective less its own prefill);
- **decode**: no slot for it. A replica runs at most ``slots`` sequences
  (its batch, or what its KV cache holds); sequences arrive and leave as a
  many-server queue does, so a fleet of ``n`` replicas keeps a request
  from waiting for a slot while the decode in progress (in full-batch
  replicas) stays under ``n`` by the square-root margin
  ``DECODE_MARGIN x sqrt(decode / slots)`` (Halfin and Whitt's staffing
  rule: a fleet's spare slots grow with the square root of its load, so a
  large fleet runs fuller than a small one at the same risk). An interval
  past that bound counts every request in it late.

Main decision, decode is a rate, not a lump: a request's decode runs for as
long as its answer takes, not the instant it arrives, so the decode work
of each interval's arrivals is spread with an exponential window as long as
a mean answer takes (:func:`steps`). Counting a long answer's whole decode
at its arrival, as a burst of work in the prefill queue, made a few
10,000-token answers look like a backlog that delays every first token and
bought replicas that decode traffic does not need.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from scaler.policy.slo.blocking import PromptTail

__all__ = ["DECODE_MARGIN", "FleetReplay", "Step", "decode_bound", "late_requests", "steps"]

#: The square-root staffing margin of decode: with ``a`` sequences in progress
#: over ``N`` slots, a request waits for one with a probability that depends on
#: ``(N - a) / sqrt(a)``; at 1.5 about 8 % wait at all, and for a few hundred
#: milliseconds when the answers take seconds.
DECODE_MARGIN = 1.5
# The decode window's bounds (seconds): at least a step's worth of answers,
# at most two minutes (an answer of thousands of tokens).
_MIN_DECODE_WINDOW_S = 2.0
_MAX_DECODE_WINDOW_S = 120.0
# Each replica's own queue is judged on the last minute's rates: long enough for
# a queue of long prompts to settle, short enough to follow the load.
_QUEUE_WINDOW_S = 60.0


class Step(NamedTuple):
    """One interval of the history as sizing sees it."""

    dt: float  # seconds
    prefill: float  # replica-seconds of prompt work that arrived in it
    decode: float  # replicas busy decoding through it (full-batch replica-seconds per second)
    requests: float  # its requests that a fleet can serve in time (the hopeless left out)
    # The last minute's arrivals per second and prompt work per second (replicas),
    # smoothed: what each replica's own queue sees (scaler.policy.slo.blocking).
    rate: float = 0.0
    load: float = 0.0
    # The replicas its decode needs so that a request rarely waits for a slot
    # (decode_bound): at fewer, every request in it is late.
    needs: float = 0.0


def steps(
    intervals: Sequence[tuple[float, float, float, float, float]],
    answer_s: float,
    slots: float,
) -> list[Step]:
    """``(dt, prefill, decode work, requests, arrivals)`` per interval as steps, the
    decode work spread over ``answer_s`` (how long a mean answer takes) by an
    exponential window (see the module docstring), the arrivals and the prompt work
    smoothed over ``_QUEUE_WINDOW_S``, and the replicas the decode needs at a batch
    of ``slots``."""
    tau = min(_MAX_DECODE_WINDOW_S, max(_MIN_DECODE_WINDOW_S, answer_s))
    out: list[Step] = []
    level = rate = load = 0.0
    for dt, prefill, decode, requests, arrivals in intervals:
        if dt <= 0:
            continue
        keep = math.exp(-dt / tau)
        # The level a constant rate of decode work would settle at is that rate;
        # the window moves it toward this interval's rate.
        level = level * keep + (decode / dt) * (1.0 - keep)
        queue_keep = math.exp(-dt / _QUEUE_WINDOW_S)
        rate = rate * queue_keep + (arrivals / dt) * (1.0 - queue_keep)
        load = load * queue_keep + (prefill / dt) * (1.0 - queue_keep)
        out.append(Step(dt, prefill, level, requests, rate, load, decode_bound(level, slots)))
    return out


_NO_TAIL = PromptTail()


def decode_bound(decode: float, slots: float) -> float:
    """The replicas that decode ``decode`` full-batch replicas' worth of sequences with
    no request waiting for a slot but rarely (module docstring)."""
    if decode <= 0:
        return 0.0
    return decode + DECODE_MARGIN * math.sqrt(decode / max(1.0, slots))


def late_requests(
    series: Sequence[Step],
    n: float,
    wait_s: float,
    *,
    tail: PromptTail = _NO_TAIL,
    stop_after: float = math.inf,
    count_from: int = 0,
) -> float:
    """Requests that a fleet of ``n`` replicas keeps waiting longer than ``wait_s`` over
    ``series`` (counted from the interval ``count_from`` on): in the fleet's fluid
    queue, or on their own replica behind a long prompt (``tail``, the prompt sizes
    seen), whichever is more. Past ``stop_after``, some count above it (the replay
    may stop there)."""
    replay = FleetReplay(series, wait_s, tail)
    if count_from:
        return replay.late_between(n, count_from)
    return replay.late(n, stop_after)


class _Run:
    """The replay at one fleet size, as far as it has gone: the queue's backlog,
    the late requests so far, and each interval's own."""

    __slots__ = ("backlog", "late", "n", "terms")

    def __init__(self, n: float) -> None:
        self.n = n
        self.backlog = 0.0
        self.late = 0.0
        self.terms: list[float] = []


class FleetReplay:
    """One decision's series replayed at each fleet size it is asked about, once.

    Sizing asks the same series about many fleet sizes, and about some of them
    twice: the whole history's late requests (the goal's count), the last few
    cold starts' (the knee), with a stop where the count passes the allowance.
    Each size's replay is kept, with each interval's late requests, so a second
    question about it is a sum over the intervals asked, and a replay stopped
    early resumes where it stopped: no interval is replayed twice at one size.
    """

    def __init__(self, series: Sequence[Step], wait_s: float, tail: PromptTail = _NO_TAIL) -> None:
        self.series = series
        self._wait_s = wait_s
        self._classes = tail.classes
        self._runs: dict[float, _Run] = {}

    def late(self, n: float, stop: float = math.inf) -> float:
        """The series' late requests at ``n`` replicas (see :func:`late_requests`); past
        ``stop``, some count above it."""
        run = self._runs.get(n)
        if run is None:
            run = self._runs[n] = _Run(n)
        if run.late <= stop and len(run.terms) < len(self.series):
            self._advance(run, stop)
        return run.late

    def late_between(self, n: float, first: int, end: int | None = None) -> float:
        """The late requests at ``n`` replicas among the intervals ``first`` to ``end``
        (the queue replayed from the series' start)."""
        self.late(n)
        return sum(self._runs[n].terms[first:end], 0.0)

    def _advance(self, run: _Run, stop: float) -> None:
        """Replays ``run`` on from where it stopped, to the end or until its late
        requests pass ``stop``. Each interval: the fluid queue moves from
        ``backlog`` to ``end`` linearly, arrivals that find more than the wait
        allowance's work ahead are late, as are those blocked on their replica
        (:meth:`PromptTail.blocked_share`, written out here: this loop is what
        sizing spends its time in), or all of them where decode leaves no room."""
        n, wait_s, classes = run.n, self._wait_s, self._classes
        backlog, late, terms = run.backlog, run.late, run.terms
        done = len(terms)
        rows = self.series if not done else self.series[done:]
        for dt, prefill, decode, requests, rate_in, load, needs in rows:
            cap = n - decode
            if cap < 0.0:
                cap = 0.0
            rate = prefill / dt
            end = backlog + (rate - cap) * dt
            if end < 0.0:
                end = 0.0
            term = 0.0
            if requests > 0:
                if needs > n or cap <= 0:
                    term = requests
                else:
                    share = _late_share(backlog, end, rate, cap, cap * wait_s, dt)
                    per_replica = rate_in / n
                    if classes and per_replica > 0:
                        busy = load / cap
                        if busy >= 1.0:
                            blocked = 1.0
                        else:
                            scale = per_replica / (1.0 - busy)
                            blocked = 0.0
                            for part, excess in classes:
                                wait = scale * excess
                                blocked += part * (wait if wait < busy else busy)
                        if blocked > share:
                            share = blocked
                    term = requests * share
                late += term
            terms.append(term)
            backlog = end
            if late > stop:
                break
        run.backlog, run.late = backlog, late


def _late_share(
    backlog: float, end: float, rate: float, cap: float, threshold: float, dt: float
) -> float:
    """The share of an interval's arrivals that find more than ``threshold`` of work
    ahead of them, the queue going from ``backlog`` to ``end`` linearly."""
    if rate >= cap:
        if end <= threshold:
            return 0.0
        rise = end - backlog
        return 1.0 if rise <= 0 else min(1.0, (end - threshold) / rise)
    if backlog <= threshold:
        return 0.0
    return min(1.0, (backlog - threshold) / (cap - rate) / dt)
