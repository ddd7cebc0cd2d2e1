"""Each request of a world's run: its row in the result, and the ones still open.

A request is *open* from its arrival until it is answered: held by the
activator (:mod:`simulator.world.hold`) or in flight on a replica. Every
request gets a row in packed columns (:mod:`simulator.columns`): when it
arrived, its first token, its end or why it failed; its priority and tenant
once the trace gives any.

Main decision: **only the open requests are kept whole.** An answered
request leaves nothing but its row, so a trace of millions is read once,
as a stream, and runs in flat memory. Every change of a request's fate
goes through :class:`Requests`, so the counts the world reports (open,
waiting for a first token) cannot drift from the rows.
"""

from __future__ import annotations

from simulator.columns import Counts, Reasons, Seconds, Times
from simulator.traces import TraceRequest

__all__ = ["Requests"]


class Requests:
    """The result's per-request columns, the open requests, and their counts."""

    def __init__(self) -> None:
        self.live: dict[int, TraceRequest] = {}  # open: held or in flight
        self.arrival_s = Seconds()
        self.outputs = Counts()
        self.first_token = Times()
        self.finished = Times()
        self.failed = Reasons()
        self.priorities: list[int] | None = None  # once a request has a class
        self.tenants: list[str] | None = None  # once a request has a tenant
        self.outstanding = 0  # open requests: held plus in flight
        self.awaiting = 0  # open requests with no first token yet
        self._sent_at: dict[int, float] = {}  # request -> when it reached its replica

    def record(self, r: TraceRequest) -> int:
        """A new request, open from now: its row's index."""
        i = len(self.arrival_s)
        self.live[i] = r
        self.arrival_s.append(r.offset_s)
        self.outputs.append(r.output_tokens)
        self.first_token.append(None)
        self.finished.append(None)
        self.failed.append(None)
        if r.priority and self.priorities is None:
            self.priorities = [0] * i
        if self.priorities is not None:
            self.priorities.append(r.priority)
        if r.tenant and self.tenants is None:
            self.tenants = [""] * i
        if self.tenants is not None:
            self.tenants.append(r.tenant)
        self.outstanding += 1
        self.awaiting += 1
        return i

    def reached(self, i: int, now: float) -> None:
        """Request ``i`` reached its replica at ``now`` (the servers' TTFT starts)."""
        self._sent_at[i] = now

    def first_token_at(self, i: int, at_s: float) -> float:
        """Request ``i``'s first token came at ``at_s``: its TTFT as the server times it."""
        self.first_token.set(i, at_s)
        self.awaiting -= 1
        return at_s - self._sent_at.pop(i, at_s)

    def finish(self, done: tuple[int, ...], at_s: float) -> None:
        """Requests ``done`` got their last token at ``at_s``."""
        for i in done:
            self.finished.set(i, at_s)
            del self.live[i]
        self.outstanding -= len(done)

    def fail(self, i: int, reason: str) -> None:
        """Request ``i`` is answered with a failure (``reason``, the scorecard's word)."""
        if self.first_token[i] is None:
            self.awaiting -= 1
        self.failed.set(i, reason)
        del self.live[i]
        self._sent_at.pop(i, None)  # lost in flight before its first token
        self.outstanding -= 1

    def lose(self, i: int) -> None:
        """A killed node took request ``i`` with it."""
        self.fail(i, "preempted")
