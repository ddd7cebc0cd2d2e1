"""The order in which held requests get capacity when they carry a class and a tenant.

The activator's Gate holds requests for a target while no replica has room,
and the policy simulator (:mod:`scaler.sim.world`) must hold them exactly as
the Gate does. Both hold with this queue, so the rules live once. A request
is held with a *priority* (an integer, higher first; the activator maps the
names ``critical``, ``standard`` and ``sheddable`` to 1, 0 and -1), a
*tenant* (an opaque string; ``""`` for requests that name none) and a *cost*
(its estimated tokens where the activator knows them, else 1).

1. **Class first**: capacity goes to the highest priority that has a request
   waiting; a lower class gets none while a higher one waits.
2. **Within a class, tenants take turns weighted by cost** (start-time fair
   queueing over tenants): each tenant has a virtual time, the cost it has
   been given in that class; the waiting tenant with the least goes next,
   and on a tie the one that was served (or began waiting) longest ago, so
   with equal costs it is plain round-robin. One tenant's thousand short
   requests and another's ten long ones get the same tokens. A tenant that
   comes back after an idle spell starts at the class's current virtual
   time: it cannot bank credit while away. Each tenant's own requests go in
   arrival order. With one class and one tenant this is the FIFO of
   :class:`~groundwork.hold_queue.HoldQueue`.
3. **A request that left is skipped** (``alive`` says which still wait) when
   it is reached, never searched for; a tenant whose requests all left is
   dropped from the turn when it comes up (it vanished).
4. **Deadlines in arrival order** (:meth:`FairHoldQueue.expire`): every
   request is held for the same time, so those past it are the oldest.
5. **Who goes when the buffer is full** (:meth:`FairHoldQueue.shed_for`,
   asked by the caller, which owns the limit): the newcomer displaces the
   newest request of the lowest class below its own, taken from the tenant
   that holds the most of that class (on a tie, the one whose newest
   request is newest); failing that, in its own class, the
   newest request of the tenant holding the most, if that tenant holds at
   least two more than the newcomer's tenant (push-out from the longest
   queue: under contention every tenant keeps about ``max-buffered`` divided
   by the tenants waiting, and a tenant alone may use the whole buffer);
   failing both, the newcomer is the one refused. With one class and one
   tenant nothing is ever displaced: the newcomer is refused, as before.

Main decision: no clock, no futures and no event loop here; times are passed
in, so the simulator runs the same code in simulated time. What is held (a
future in the Gate, a request index in the simulator) and how capacity is
found (``take``) are the caller's.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["FairHoldQueue"]

T = TypeVar("T")
R = TypeVar("R")


class _Entry(Generic[T]):
    __slots__ = ("cost", "gone", "item", "since")

    def __init__(self, item: T, since: float, cost: int) -> None:
        self.item = item
        self.since = since
        self.cost = cost
        # Handed out, expired, shed or drained here, or found to have left.
        self.gone = False


class _Flow(Generic[T]):
    """One tenant's requests in one class, in arrival order."""

    __slots__ = ("active", "entries", "seq", "vtime")

    def __init__(self) -> None:
        self.entries: deque[_Entry[T]] = deque()
        self.vtime = 0  # cost handed to this tenant in this class
        self.seq = 0  # when it last joined the turn or was served (ties)
        self.active = False  # on the band's heap


class _Band(Generic[T]):
    """One class: its tenants' flows and whose turn it is."""

    __slots__ = ("flows", "heap", "seq", "vclock")

    def __init__(self) -> None:
        self.flows: dict[str, _Flow[T]] = {}
        # (vtime, seq, tenant) of each active flow; an emptied flow is popped
        # when it reaches the top.
        self.heap: list[tuple[int, int, str]] = []
        self.vclock = 0  # virtual time of the last request handed out
        self.seq = 0


class FairHoldQueue(Generic[T]):
    """Held requests, released by class, then by tenant in weighted turns."""

    __slots__ = ("_alive", "_arrivals", "_bands", "_live", "_order")

    def __init__(self, alive: Callable[[T], bool] | None = None) -> None:
        # None: every entry waits until handed out, expired, shed or drained.
        self._alive = alive
        self._bands: dict[int, _Band[T]] = {}
        self._order: list[int] = []  # the bands' priorities, negated, ascending
        # Every entry in arrival order, for deadlines; one that is gone is
        # dropped when it reaches the head or when the deque is compacted.
        self._arrivals: deque[_Entry[T]] = deque()
        self._live = 0  # entries held and not known to be gone

    def __len__(self) -> int:
        """Requests waiting, as far as known (one that left counts until it is reached)."""
        return self._live

    def __bool__(self) -> bool:
        return self._live > 0

    # -- holding ------------------------------------------------------------

    def hold(
        self, item: T, since: float, priority: int = 0, tenant: str = "", cost: int = 1
    ) -> None:
        """Hold ``item``, held since ``since``, in class ``priority`` for ``tenant``;
        ``cost`` (at least 1) is what it counts against the tenant's turns."""
        band = self._bands.get(priority)
        if band is None:
            band = self._bands[priority] = _Band()
            bisect.insort(self._order, -priority)
        flow = band.flows.get(tenant)
        if flow is None:
            flow = band.flows[tenant] = _Flow()
        entry = _Entry(item, since, max(1, cost))
        flow.entries.append(entry)
        if not flow.active:
            # Back after an idle spell: no credit for the time away.
            flow.vtime = max(flow.vtime, band.vclock)
            band.seq += 1
            flow.seq = band.seq
            flow.active = True
            heapq.heappush(band.heap, (flow.vtime, flow.seq, tenant))
        self._arrivals.append(entry)
        self._live += 1
        if len(self._arrivals) > 2 * self._live + 64:
            self.compact()

    def _waiting(self, entry: _Entry[T]) -> bool:
        """Still waiting; one found to have left is marked gone here, once."""
        if entry.gone:
            return False
        if self._alive is not None and not self._alive(entry.item):
            entry.gone = True
            self._live -= 1
            return False
        return True

    def _gone(self, entry: _Entry[T]) -> T:
        entry.gone = True
        self._live -= 1
        return entry.item

    # -- releasing ----------------------------------------------------------

    def _head(self) -> tuple[_Band[T], _Flow[T]] | None:
        """The band and flow whose head goes next, dropping what left on the way."""
        order, bands = self._order, self._bands
        while order:
            priority = -order[0]
            band = bands[priority]
            heap = band.heap
            while heap:
                flow = band.flows[heap[0][2]]
                entries = flow.entries
                while entries and not self._waiting(entries[0]):
                    entries.popleft()
                if entries:
                    return band, flow
                heapq.heappop(heap)  # every request of this tenant left or was served
                flow.active = False
            # Nobody waits in this class: forget it (and its tenants' turns).
            del bands[priority]
            order.pop(0)
        return None

    def hand_out(self, take: Callable[[T], R | None]) -> Iterator[tuple[T, float, R]]:
        """Give capacity in release order: ``(item, held since, capacity)`` for as
        long as ``take(next)`` finds some for the request whose turn it is.

        ``take`` is called again only after the caller has used the previous
        capacity (the loop body runs in between), so it sees that capacity
        counted."""
        while True:
            found = self._head()
            if found is None:
                return
            band, flow = found
            entry = flow.entries[0]
            got = take(entry.item)
            if got is None:
                return
            flow.entries.popleft()
            self._gone(entry)
            band.vclock = flow.vtime
            flow.vtime += entry.cost
            band.seq += 1
            flow.seq = band.seq
            tenant = band.heap[0][2]
            if flow.entries:
                heapq.heapreplace(band.heap, (flow.vtime, flow.seq, tenant))
            else:
                heapq.heappop(band.heap)
                flow.active = False
            yield entry.item, entry.since, got

    # -- leaving ------------------------------------------------------------

    def expire(self, held_for_s: float, now: float) -> list[T]:
        """Remove and return those held for ``held_for_s`` or more at ``now`` (the
        requests still waiting; those that left are dropped)."""
        arrivals = self._arrivals
        out: list[T] = []
        while arrivals and arrivals[0].since + held_for_s <= now:
            entry = arrivals.popleft()
            if self._waiting(entry):
                out.append(self._gone(entry))
        return out

    def shed_for(self, priority: int, tenant: str = "") -> T | None:
        """The buffer is full and a request of ``priority`` for ``tenant`` arrives:
        remove and return the held request it displaces, or None when the
        newcomer itself must be refused (rule 5 of the module docstring)."""
        for negated in reversed(self._order):
            if -negated >= priority:
                break
            victim = self._newest_of_heaviest(self._bands[-negated], None)
            if victim is not None:
                return victim
        band = self._bands.get(priority)
        if band is None:
            return None
        own = band.flows.get(tenant)
        floor = (self._tidy_tail(own) if own is not None else 0) + 1
        return self._newest_of_heaviest(band, tenant, more_than=floor)

    def _tidy_tail(self, flow: _Flow[T]) -> int:
        """Drop what left from the back of ``flow``; how many entries remain."""
        entries = flow.entries
        while entries and not self._waiting(entries[-1]):
            entries.pop()
        return len(entries)

    def _newest_of_heaviest(
        self, band: _Band[T], spare: str | None, more_than: int = 0
    ) -> T | None:
        """Remove and return the newest request of the tenant holding the most in
        ``band`` (not ``spare``), if it holds more than ``more_than``."""
        heaviest: _Flow[T] | None = None
        best = (more_than, 0.0)
        for name, flow in band.flows.items():
            if name == spare:
                continue
            size = self._tidy_tail(flow)
            # A tie goes to the tenant whose newest request is newest: the
            # request shed is then the one that waited least.
            if size > more_than and (size, flow.entries[-1].since) > best:
                heaviest, best = flow, (size, flow.entries[-1].since)
        if heaviest is None:
            return None
        return self._gone(heaviest.entries.pop())

    def drain(self) -> list[T]:
        """Remove and return every request still waiting (its target went away, or a
        wake was refused)."""
        out = [self._gone(e) for e in self._arrivals if self._waiting(e)]
        self._arrivals.clear()
        self._bands.clear()
        self._order.clear()
        return out

    def compact(self) -> None:
        """Drop every entry that is gone or left, wherever it is in the queue."""
        self._arrivals = deque(e for e in self._arrivals if self._waiting(e))
        for band in self._bands.values():
            for flow in band.flows.values():
                flow.entries = deque(e for e in flow.entries if not e.gone)
