"""The order in which held requests get capacity when they carry a class and a tenant.

The activator's Gate holds requests for a target while no replica has room,
and the policy simulator (:mod:`simulator.world`) must hold them exactly as
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
   arrival order. With one class and one tenant (requests without the
   headers) this is a plain FIFO in arrival order, and :meth:`hand_out`
   serves it without searching for the next flow.
3. **A request that left leaves at once** (:meth:`FairHoldQueue.leave`, when
   the caller knows it: its client went away, its deadline passed), or, for
   a caller that only knows it later (``alive`` says which still wait), is
   skipped when reached, never searched for; a tenant whose requests all
   left is dropped from the turn when it comes up (it vanished).
4. **A request that cannot go for a reason of its own is passed over**
   (``take`` answers :data:`SKIP`: its LoRA adapter has no slot on any
   replica with room, say), never keeping a request behind it that could
   go: the order above is kept among the requests that can go. It keeps its
   place and its tenant's turn for the next release.
5. **Deadlines in arrival order** (:meth:`FairHoldQueue.expire`): every
   request is held for the same time, so those past it are the oldest, at
   the head of each tenant's requests.
6. **Who goes when the buffer is full** (:meth:`FairHoldQueue.displace`,
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
   The caller is told which rule fired (:data:`BY_CLASS`, :data:`BY_TENANT`),
   so the request displaced can be told why.

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

__all__ = ["BY_CLASS", "BY_TENANT", "SKIP", "FairHoldQueue", "Skip"]

T = TypeVar("T")
R = TypeVar("R")

# Which rule of shedding displaced a request (rule 6 of the module docstring).
BY_CLASS = "class"
BY_TENANT = "tenant"


class Skip:
    """What ``take`` answers for a request that cannot go for a reason of its own while
    others may (:data:`SKIP`, the one instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SKIP"


SKIP = Skip()


# An entry: (item, held since, cost). A tuple, not an object: every held request
# makes one, and a tuple costs a tenth of an instance with slots. An entry is
# always removed from its flow when it leaves through the queue (handed out,
# expired, shed, drained), so it needs no mark; one whose caller went away is
# skipped (``alive``) when reached.


class _Flow(Generic[T]):
    """One tenant's requests in one class, in arrival order."""

    __slots__ = ("active", "entries", "seq", "vtime")

    def __init__(self) -> None:
        self.entries: deque[tuple[T, float, int]] = deque()
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

    __slots__ = ("_alive", "_bands", "_count", "_order")

    def __init__(self, alive: Callable[[T], bool] | None = None) -> None:
        # None: every entry waits until handed out, expired, shed or drained.
        self._alive = alive
        self._bands: dict[int, _Band[T]] = {}
        self._order: list[int] = []  # the bands' priorities, negated, ascending
        self._count = 0  # entries in the flows, those that left and are not dropped included

    def __len__(self) -> int:
        """Entries, including those that left and have not been dropped yet."""
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

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
        flow.entries.append((item, since, cost if cost > 1 else 1))
        self._count += 1
        if not flow.active:
            # Back after an idle spell: no credit for the time away.
            if flow.vtime < band.vclock:
                flow.vtime = band.vclock
            band.seq += 1
            flow.seq = band.seq
            flow.active = True
            heapq.heappush(band.heap, (flow.vtime, flow.seq, tenant))

    # -- releasing ----------------------------------------------------------

    def _head(self) -> tuple[_Band[T], _Flow[T]] | None:
        """The band and flow whose head goes next, dropping what left on the way."""
        order, bands, alive = self._order, self._bands, self._alive
        while order:
            priority = -order[0]
            band = bands[priority]
            heap = band.heap
            while heap:
                flow = band.flows[heap[0][2]]
                entries = flow.entries
                if alive is not None:
                    while entries and not alive(entries[0][0]):
                        entries.popleft()
                        self._count -= 1
                if entries:
                    return band, flow
                heapq.heappop(heap)  # every request of this tenant left or was served
                flow.active = False
            # Nobody waits in this class: forget it (and its tenants' turns).
            del bands[priority]
            order.pop(0)
        return None

    def hand_out(self, take: Callable[[T], R | Skip | None]) -> Iterator[tuple[T, float, R]]:
        """Give capacity in release order: ``(item, held since, capacity)`` for as
        long as ``take(next)`` finds some for the request whose turn it is.

        ``take`` answers None when there is no capacity for anyone (the release
        ends), or :data:`SKIP` when this request cannot go for a reason of its
        own: it is passed over and the next in order is asked (rule 4). It is
        called again only after the caller has used the previous capacity (the
        loop body runs in between), so it sees that capacity counted."""
        alive, order, bands = self._alive, self._order, self._bands
        found = self._head()
        while found is not None:
            band, flow = found
            top = order[0]
            entries = flow.entries
            item, since, cost = entries[0]
            got = take(item)
            if got is None:
                return
            if isinstance(got, Skip):
                yield from self._hand_out_passing(take, passed={id(flow): 1})
                return
            entries.popleft()
            self._count -= 1
            self._served(band, flow, cost, more=bool(entries))
            yield item, since, got
            # The common case (one class, one tenant: no headers) goes on with the
            # same flow without looking for the next one.
            heap = band.heap
            if not (
                entries
                and len(heap) == 1
                and order
                and order[0] == top
                and bands.get(-top) is band
                and (alive is None or alive(entries[0][0]))
            ):
                found = self._head()

    def _served(self, band: _Band[T], flow: _Flow[T], cost: int, *, more: bool) -> None:
        """``flow``, the top of ``band``'s turns, was handed a request of ``cost``:
        advance its turn; ``more``: it still has requests waiting."""
        band.vclock = flow.vtime
        flow.vtime += cost
        band.seq += 1
        flow.seq = band.seq
        heap = band.heap
        tenant = heap[0][2]
        if not more:
            heapq.heappop(heap)
            flow.active = False
        elif len(heap) == 1:
            heap[0] = (flow.vtime, flow.seq, tenant)  # alone in its class: still next
        else:
            heapq.heapreplace(heap, (flow.vtime, flow.seq, tenant))

    def _hand_out_passing(
        self, take: Callable[[T], R | Skip | None], passed: dict[int, int]
    ) -> Iterator[tuple[T, float, R]]:
        """:meth:`hand_out` once some request answered :data:`SKIP`: the same order over
        the requests that can go. Within a tenant, the requests passed over are
        counted from the front of its queue (``passed``: ``id(flow)`` -> how many,
        those already asked); a tenant with none that can go is set aside,
        keeping its turn (its virtual time), and put back at the end."""
        alive = self._alive
        aside: list[tuple[_Band[T], tuple[int, int, str]]] = []
        try:
            for negated in list(self._order):
                band = self._bands.get(-negated)
                if band is None:
                    continue
                heap = band.heap
                while heap:
                    turn = heap[0]
                    flow = band.flows[turn[2]]
                    entries = flow.entries
                    at = passed.get(id(flow), 0)
                    while at < len(entries) and alive is not None and not alive(entries[at][0]):
                        del entries[at]
                        self._count -= 1
                    if at >= len(entries):
                        heapq.heappop(heap)
                        if entries:
                            aside.append((band, turn))  # none of its requests can go now
                        else:
                            flow.active = False
                        continue
                    item, since, cost = entries[at]
                    got = take(item)
                    if got is None:
                        return
                    if isinstance(got, Skip):
                        passed[id(flow)] = at + 1
                        continue
                    del entries[at]
                    self._count -= 1
                    self._served(band, flow, cost, more=bool(entries))
                    yield item, since, got
        finally:
            for band, turn in aside:
                heapq.heappush(band.heap, turn)
            self._forget_idle_bands()

    def _forget_idle_bands(self) -> None:
        """Drop the classes nobody waits in (and their tenants' turns), as :meth:`_head`
        does when it reaches one."""
        for negated in [n for n in self._order if not self._bands[-n].heap]:
            del self._bands[-negated]
            self._order.remove(negated)

    # -- leaving ------------------------------------------------------------

    def _waiting(self, entry: tuple[T, float, int]) -> bool:
        return self._alive is None or self._alive(entry[0])

    def expire(self, held_for_s: float, now: float) -> list[T]:
        """Remove and return those held for ``held_for_s`` or more at ``now`` (the
        requests still waiting, oldest first; those that left are dropped).

        Every flow is in arrival order, so those past the deadline are at the
        heads of the flows."""
        out: list[tuple[float, T]] = []
        cutoff = now - held_for_s
        for band in self._bands.values():
            for flow in band.flows.values():
                entries = flow.entries
                while entries and entries[0][1] <= cutoff:
                    entry = entries.popleft()
                    self._count -= 1
                    if self._waiting(entry):
                        out.append((entry[1], entry[0]))
        out.sort(key=lambda e: e[0])
        return [item for _, item in out]

    def leave(self, item: T, priority: int = 0, tenant: str = "") -> bool:
        """Remove ``item``, held in class ``priority`` for ``tenant``, now (its client
        went away, its deadline passed); False when it is not held there.

        It is searched for from the front of its tenant's requests, where those
        that leave by their deadline are; a tenant left with none drops out of
        the turn when it comes up."""
        band = self._bands.get(priority)
        flow = band.flows.get(tenant) if band is not None else None
        if flow is None:
            return False
        for at, entry in enumerate(flow.entries):
            if entry[0] is item:
                del flow.entries[at]
                self._count -= 1
                return True
        return False

    def displace(self, priority: int, tenant: str = "") -> tuple[T, str] | None:
        """The buffer is full and a request of ``priority`` for ``tenant`` arrives:
        remove and return the held request it displaces and the rule that
        chose it (:data:`BY_CLASS` or :data:`BY_TENANT`), or None when the
        newcomer itself must be refused (rule 6 of the module docstring)."""
        for negated in reversed(self._order):
            if -negated >= priority:
                break
            victim = self._newest_of_heaviest(self._bands[-negated], None)
            if victim is not None:
                return victim, BY_CLASS
        band = self._bands.get(priority)
        if band is None:
            return None
        own = band.flows.get(tenant)
        floor = (self._tidy_tail(own) if own is not None else 0) + 1
        victim = self._newest_of_heaviest(band, tenant, more_than=floor)
        return (victim, BY_TENANT) if victim is not None else None

    def shed_for(self, priority: int, tenant: str = "") -> T | None:
        """:meth:`displace` without the rule: the request displaced, or None."""
        displaced = self.displace(priority, tenant)
        return displaced[0] if displaced is not None else None

    def _tidy_tail(self, flow: _Flow[T]) -> int:
        """Drop what left from the back of ``flow``; how many entries remain."""
        entries = flow.entries
        while entries and not self._waiting(entries[-1]):
            entries.pop()
            self._count -= 1
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
            if size > more_than and (size, flow.entries[-1][1]) > best:
                heaviest, best = flow, (size, flow.entries[-1][1])
        if heaviest is None:
            return None
        self._count -= 1
        return heaviest.entries.pop()[0]

    def drain(self) -> list[T]:
        """Remove and return every request still waiting, oldest first (its target went
        away, or a wake was refused)."""
        out = [
            (entry[1], entry[0])
            for band in self._bands.values()
            for flow in band.flows.values()
            for entry in flow.entries
            if self._waiting(entry)
        ]
        self._bands.clear()
        self._order.clear()
        self._count = 0
        out.sort(key=lambda e: e[0])
        return [item for _, item in out]

    def compact(self) -> None:
        """Drop every entry that left, wherever it is in the queue."""
        if self._alive is None:
            return
        count = 0
        for band in self._bands.values():
            for flow in band.flows.values():
                flow.entries = deque(e for e in flow.entries if self._waiting(e))
                count += len(flow.entries)
        self._count = count
