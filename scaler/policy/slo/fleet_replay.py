"""Who waits too long at ``n`` replicas, asked of one decision's series at many ``n``: pure.

Sizing (:mod:`scaler.policy.slo.sizing`) asks one replayed history
(:mod:`scaler.policy.slo.replay`, its :class:`~scaler.policy.slo.replay.Step`
per interval) how many requests a fleet of ``n`` replicas keeps waiting past
the objective, for some ten fleet sizes per decision: the goal's search, the
knee's (over the last few cold starts only), the count's share and the next
replica's. Each interval, the prompt work queues in a fluid queue served at
what decode leaves of the replicas (``n - decode``): a request is late when
the work ahead of it takes longer than its wait allowance, when it is
blocked on its own replica behind a long prompt
(:meth:`~scaler.policy.slo.blocking.PromptTail.blocked_share`), whichever is
more, and every request is late where decode leaves no room at all.

Main decision, what one replay tells of another: a larger fleet's queue is
never longer, interval by interval, and none of its requests is later. So
an interval whose queue is empty at ``n0`` replicas at both its ends and
that has no late request there is the same at every ``n`` above ``n0``
(nothing late, the queue empty after it), and where ``n0``'s queue is empty
at an interval's end, a larger fleet's is too: the replay above ``n0``
need not look at the first kind (nearly every interval of a fleet near its
count, where blocking behind long prompts is not in play), and a count from
a given interval on can start after the second kind. A :class:`FleetReplay`
keeps every size it has replayed, with each interval's late requests; the
count at a new size is found over the intervals the largest complete
replay below it leaves, and is the same to the last bit as a replay of the
whole series (the intervals left out add exactly zero).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

from scaler.policy.slo.blocking import PromptTail
from scaler.policy.slo.replay import Step

__all__ = ["FleetReplay", "late_requests"]

_NO_TAIL = PromptTail()


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
    """One size's replay over ``rows`` (indices into the series, rising), as far as it
    has gone: the queue's work, the late requests so far, and per row replayed its
    late requests and the queue's work at its end."""

    __slots__ = ("backlog", "ends", "late", "n", "rows", "saturated", "terms")

    def __init__(self, n: float, rows: Sequence[int]) -> None:
        self.n = n
        self.rows = rows
        self.backlog = 0.0
        self.late = 0.0
        self.terms: list[float] = []
        self.ends: list[float] = []
        # Whether a replica was past its capacity where requests came (all of them
        # blocked there, whatever the prompts' sizes).
        self.saturated = False

    @property
    def complete(self) -> bool:
        return len(self.terms) == len(self.rows)

    def busy_rows(self) -> list[int]:
        """The rows with a request late or the queue not empty at their end: at a
        larger fleet, the others have none late either and leave the queue empty,
        whatever it found."""
        return [
            row
            for row, term, end in zip(self.rows, self.terms, self.ends, strict=True)
            if term or end
        ]

    def between(self, first: int, end: int) -> float:
        """The late requests of the rows from ``first`` to ``end`` (this run covers them)."""
        lo, hi = bisect_left(self.rows, first), bisect_left(self.rows, end)
        return sum(self.terms[lo:hi], 0.0)


class FleetReplay:
    """One decision's series replayed at each fleet size it is asked about, each
    interval at most once per size (see the module docstring).

    ``floor``: the fewest replicas the caller expects to ask about. The first
    question above it with no complete replay below replays the floor whole
    first, so that the sizes above replay only what it found busy: a count from
    a given interval on always (the queue's empty intervals shorten it), a whole
    count where no request is blocked behind a long prompt (elsewhere every
    interval with requests is busy, and a whole replay of the floor would be
    one more pass).
    """

    def __init__(
        self, series: Sequence[Step], wait_s: float, tail: PromptTail = _NO_TAIL, *, floor: int = 0
    ) -> None:
        self.series = series
        self.wait_s = wait_s
        self.floor = floor
        # A replica past its capacity blocks everyone on it (PromptTail.blocked_share);
        # short of that, a class no prompt of which waits past its slack blocks nobody.
        self._tail = bool(tail.classes)
        self._classes = tuple(c for c in tail.classes if c[1] != 0.0)
        self._untailed: FleetReplay | None = None
        self._runs: dict[float, _Run] = {}  # from the series' start
        self._busy: dict[float, list[int]] = {}  # per complete run, its busy rows
        self._windows: dict[tuple[float, int], _Run] = {}

    def late(self, n: float, stop: float = math.inf) -> float:
        """The series' late requests at ``n`` replicas (see :func:`late_requests`); past
        ``stop``, some count above it."""
        run = self._runs.get(n)
        if run is None:
            below = self._below(n, prime=not self._classes)
            rows = range(len(self.series)) if below is None else self._busy_of(below)
            run = self._runs[n] = _Run(n, rows)
        if run.late <= stop and not run.complete:
            self._advance(run, stop)
        return run.late

    def late_between(
        self, n: float, first: int, end: int | None = None, *, blocked: bool = True
    ) -> float:
        """The late requests at ``n`` replicas among the intervals ``first`` to ``end``
        (the queue replayed from the series' start); ``blocked`` False: as though no
        request were blocked behind a long prompt (the fleet's queue alone)."""
        end = len(self.series) if end is None else end
        if not blocked and self._tail:
            # The same replay where nothing was blocked at this size.
            self.late(n)
            if self._classes or self._runs[n].saturated:
                if self._untailed is None:
                    self._untailed = FleetReplay(self.series, self.wait_s)
                return self._untailed.late_between(n, first, end)
        run = self._runs.get(n)
        if run is None or not run.complete:
            if (n, first) not in self._windows:
                self._windows[n, first] = self._window(n, first)
            run = self._windows[n, first]
        return run.between(first, end)

    def _window(self, n: float, first: int) -> _Run:
        """A replay at ``n`` that covers the rows from ``first`` on, without a complete
        run at ``n``: from the last row before ``first`` where the largest complete
        run below ``n`` leaves the queue empty (so does ``n``'s), over the rows that
        run found busy; the whole run at ``n`` where there is none below."""
        below = self._below(n, prime=True)
        if below is None:
            self.late(n)
            return self._runs[n]
        ref = self._runs[below]
        k = bisect_left(ref.rows, first)
        while k > 0 and ref.ends[k - 1]:
            k -= 1
        # The rows before ref.rows[k] end with the queue empty at ``below``, so at ``n``.
        start = ref.rows[k] if k < len(ref.rows) else len(self.series)
        busy = self._busy_of(below)
        run = _Run(n, busy[bisect_left(busy, start) :])
        self._advance(run, math.inf)
        return run

    def _below(self, n: float, *, prime: bool) -> float | None:
        """The largest size under ``n`` replayed to the end, if any; with ``prime``,
        the floor (replayed whole now) where there is none and it is under ``n``."""
        done = [m for m, run in self._runs.items() if m < n and run.complete]
        if done:
            return max(done)
        if prime and 0 < self.floor < n:
            self.late(self.floor)
            return self.floor
        return None

    def _busy_of(self, n: float) -> list[int]:
        if n not in self._busy:
            self._busy[n] = self._runs[n].busy_rows()
        return self._busy[n]

    def _advance(self, run: _Run, stop: float) -> None:
        """Replays ``run`` on from where it stopped, to the end of its rows or until its
        late requests pass ``stop``. Each row: the fluid queue moves from ``backlog``
        to ``end`` linearly, arrivals that find more than the wait allowance's work
        ahead are late, as are those blocked on their replica
        (:meth:`PromptTail.blocked_share`, written out here: this loop is what sizing
        spends its time in), or all of them where decode leaves no room. A row left
        out before this one ended with the queue empty."""
        n, wait_s, series = run.n, self.wait_s, self.series
        tail, classes = self._tail, self._classes
        backlog, late, terms, ends = run.backlog, run.late, run.terms, run.ends
        saturated = run.saturated
        done = len(terms)
        last = run.rows[done - 1] if done else -1
        for row in run.rows[done:]:
            dt, prefill, decode, requests, rate_in, load, needs = series[row]
            if row != last + 1:
                backlog = 0.0
            last = row
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
                    # The share of its arrivals that find more than the allowance's
                    # work ahead, the queue going from ``backlog`` to ``end`` linearly.
                    threshold = cap * wait_s
                    if rate >= cap:
                        if end <= threshold:
                            share = 0.0
                        else:
                            rise = end - backlog
                            share = 1.0 if rise <= 0 else min(1.0, (end - threshold) / rise)
                    elif backlog <= threshold:
                        share = 0.0
                    else:
                        share = min(1.0, (backlog - threshold) / (cap - rate) / dt)
                    per_replica = rate_in / n
                    if tail and per_replica > 0:
                        busy = load / cap
                        if busy >= 1.0:
                            share, saturated = 1.0, True
                        elif classes:
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
            ends.append(end)
            backlog = end
            if late > stop:
                break
        run.backlog, run.late, run.saturated = backlog, late, saturated
