"""One target's LoRA adapters on its replicas: which replica a request goes to, loads, unloads.

A target that declares adapters (``routing.tidal.dev/adapters``) gets one
:class:`AdapterSlots`; a target without them has none and pays nothing.

- **Choosing** (:meth:`AdapterSlots.pick`, through the gate's
  :class:`AdapterPicker`): it runs
  :func:`activator.balancing.adapter_affinity.choose` over what each ready
  replica has loaded and reserves its choice at once (the request counts as
  in flight for the adapter; a load to do is marked as loading, with the
  adapter it evicts, and started), so the next request sees it. None means
  "not now": the request waits in the gate, which passes over it to the
  requests behind it that can go (a request for another adapter, or for
  the base model, is never kept waiting by this one).
- **Loading while the request is held** (:meth:`AdapterSlots.ready`): the
  load is a task of the slots' own, started when a request chose it
  (unloading the evicted adapter first); every request for that adapter and
  replica awaits its outcome, and one that leaves does not stop it (the
  next request finds the adapter loaded). A refusal takes that replica off
  for that adapter for ``REFUSAL_HOLD_S`` (logged as a warning, and reported
  to the scaler, which raises an ``AdapterLoadRefused`` Warning Event on the
  Deployment); the request then chooses again.
- **Never, said at once** (:meth:`AdapterSlots.never`): a request that the
  replicas there are can never serve is answered the moment that is known,
  rather than held until its cold-start timeout: its adapter is no longer
  declared (:class:`AdapterWithdrawn`, answered as an unknown adapter is); no
  ready replica publishes LoRA support and none is still starting
  (:class:`LoraUnsupported`: the answer names ``--enable-lora`` and
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``, and the scaler is told, for an
  Event, at most once per ``REFUSAL_HOLD_S``); every ready replica refused it
  or cannot load adapters (:class:`AdapterLoadFailed`, with what they said).
  At zero, or while a replica is still starting, the request is held: a
  replica to come may serve it.
- **Learning and keep-alive** (:meth:`AdapterSlots.refresh`, every few
  seconds from :mod:`activator.holding.adapter_keeper`): each ready
  replica's model list and ``vllm:lora_requests_info`` replace what is known
  of it (what Tidal loaded included: the server is the truth), then adapters
  idle past the keep-alive are unloaded, least recently used first.
- **A changed declaration** (:meth:`AdapterSlots.configure`): requests
  waiting on a load of an adapter no longer declared are answered at once;
  what the replicas have loaded stays known (an adapter no longer declared
  and idle is the first evicted when another needs its slot).

Why the activator drives loads and not the scaler: the load is on the
request's path (it is held until its adapter is ready, about a second),
the activator is the one that sees each request and which replica it went
to (the recency the keep-alive needs), and the scaler's tick and scrape
interval are slower than a load. The scaler still scales the base model on
the adapters' summed demand: every adapter request counts in its target's
concurrency.

Main decision: several requests for one adapter arriving together cause
one load, not one each; an unload never races a request the server is
running (busy adapters, ours or the server's, are never unloaded).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from activator.balancing.adapter_affinity import Move, ReplicaAdapters, choose, idle_adapters
from activator.clock import Clock
from activator.holding.hold_errors import (
    AdapterLoadFailed,
    AdapterWithdrawn,
    HoldError,
    LoraUnsupported,
)
from activator.replicas.lora_client import LORA_FIX, LoadRefused
from activator.replicas.lora_state import LoraInfo
from activator.replicas.readiness import EndpointTracker
from activator.targets import Adapter

__all__ = ["REFUSAL_HOLD_S", "AdapterIO", "AdapterPicker", "AdapterSlots", "LoadRefused"]

# A replica that refused an adapter is not asked for it again for this long (a
# refusal may be passing: a full disk, a slow Hub, a timeout).
REFUSAL_HOLD_S = 60.0
# Refusals kept for one report: a flood of them says no more than the first few.
MAX_REPORTED_REFUSALS = 10

log = logging.getLogger(__name__)


class AdapterIO(Protocol):
    """The calls to a replica (:mod:`activator.replicas.lora_client` over HTTP)."""

    def load(self, base_url: str, name: str, source: str) -> Awaitable[None]: ...

    def unload(self, base_url: str, name: str) -> Awaitable[bool]: ...

    def look(self, base_url: str) -> Awaitable[tuple[frozenset[str], LoraInfo | None]]: ...


@dataclass
class _Replica:
    loaded: set[str] = field(default_factory=set)
    loading: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    unloading: set[str] = field(default_factory=set)  # unloads under way (idle or evicted)
    evicting: set[str] = field(default_factory=set)  # unloaded to make room for a load
    refused: dict[str, tuple[float, str]] = field(default_factory=dict)  # adapter -> when, why
    # Loads (True) and unloads (False) this activator made, and when: a look that
    # began before one ended cannot show it, so it does not override it.
    touched: dict[str, tuple[float, bool]] = field(default_factory=dict)
    last_used: dict[str, float] = field(default_factory=dict)
    ours: Counter[str] = field(default_factory=Counter)
    server_busy: frozenset[str] = frozenset()
    max_loras: int = 1  # until the server says (vllm:lora_requests_info)
    looked: bool = False  # the server has said (max_loras is its word, not a guess)

    def refused_now(self, name: str, now: float) -> str | None:
        """Why this replica refused ``name`` within ``REFUSAL_HOLD_S``, else None."""
        got = self.refused.get(name)
        return got[1] if got is not None and now - got[0] < REFUSAL_HOLD_S else None

    def view(self, in_flight: int, now: float) -> ReplicaAdapters:
        loading = frozenset(self.loading)
        refused = frozenset(n for n, (t, _) in self.refused.items() if now - t < REFUSAL_HOLD_S)
        unloading = frozenset(self.unloading)
        return ReplicaAdapters(
            loaded=(frozenset(self.loaded) | loading) - unloading,
            max_loras=self.max_loras,
            in_flight=in_flight,
            busy=frozenset(+self.ours) | self.server_busy | loading,
            refused=refused,
            last_used=self.last_used,
            unloading=unloading,
        )


class AdapterPicker:
    """The gate's picker for one adapter's requests (see :meth:`AdapterSlots.pick`)."""

    __slots__ = ("name", "slots")

    def __init__(self, slots: AdapterSlots, name: str) -> None:
        self.slots = slots
        self.name = name

    def pick(
        self, ready: Sequence[EndpointTracker], limit: int, rng: random.Random
    ) -> EndpointTracker | None:
        return self.slots.pick(self.name, ready, limit)

    def never(
        self, ready: Sequence[EndpointTracker], known: Iterable[EndpointTracker]
    ) -> HoldError | None:
        """Why the replicas there are can never serve this adapter (None: they may)."""
        return self.slots.never(self.name, ready, known)

    def undo(self, tracker: EndpointTracker) -> None:
        """The gate gave back a replica it had handed to a request that left."""
        self.slots.done(self.name, tracker)


class AdapterSlots:
    """A target's adapters on its replicas (module docstring)."""

    def __init__(
        self,
        adapters: tuple[Adapter, ...],
        keep_alive_s: float,
        io: AdapterIO,
        *,
        clock: Clock,
        target: str = "",
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.io = io
        self.target = target
        self._clock = clock
        self._replicas: dict[str, _Replica] = {}
        self._loads: set[asyncio.Task[None]] = set()
        # Told when what a held request may get changed (a load ended, a replica
        # was learned, the declaration changed): its target's gate looks again.
        self.on_change = on_change
        # Refusals since the last report to the scaler, which raises them as Events.
        self.refusals: list[str] = []
        self._unsupported_said_at: float | None = None
        self.sources: dict[str, str] = {}
        self.declared: frozenset[str] = frozenset()
        self.configure(adapters, keep_alive_s)

    def configure(self, adapters: tuple[Adapter, ...], keep_alive_s: float) -> None:
        """The declaration now; requests waiting on a load of an adapter it no longer
        lists are answered at once (:class:`AdapterWithdrawn`)."""
        self.sources = {a.name: a.source for a in adapters}
        withdrawn = self.declared - frozenset(self.sources)
        self.declared = frozenset(self.sources)
        self.keep_alive_s = keep_alive_s
        for replica in self._replicas.values():
            for name, future in replica.loading.items():
                if name in withdrawn and not future.done():
                    future.set_exception(self._withdrawn(name))
                    future.exception()  # retrieved: each waiter raises it itself

    def _withdrawn(self, name: str) -> AdapterWithdrawn:
        declared = ", ".join(repr(n) for n in sorted(self.declared)[:20]) or "none"
        return AdapterWithdrawn(
            f"{name!r} is no longer declared for {self.target}; declared now: {declared}"
        )

    def close(self) -> None:
        """The target is gone: stop the loads under way."""
        for task in self._loads:
            task.cancel()

    def _replica(self, key: str) -> _Replica:
        found = self._replicas.get(key)
        if found is None:
            found = self._replicas[key] = _Replica()
        return found

    def loaded_on(self, key: str) -> frozenset[str]:
        """What is known loaded on the replica ``key`` (``host:port``)."""
        replica = self._replicas.get(key)
        return frozenset(replica.loaded) if replica else frozenset()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # -- the request path ---------------------------------------------------------------

    def picker(self, name: str) -> AdapterPicker:
        return AdapterPicker(self, name)

    def pick(
        self, name: str, ready: Sequence[EndpointTracker], limit: int
    ) -> EndpointTracker | None:
        """Choose and reserve a replica for a request for ``name``; None: not now."""
        if name not in self.declared:
            return None  # answered by never(), not sent
        now = self._clock()
        views = [self._replica(t.key).view(t.in_flight, now) for t in ready]
        choice = choose(name, views, limit)
        if choice is None:
            return None
        tracker = ready[choice.index]
        replica = self._replica(tracker.key)
        replica.ours[name] += 1
        replica.last_used[name] = now
        if choice.move is Move.LOAD:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            replica.loading[name] = future
            if choice.evict is not None:
                replica.loaded.discard(choice.evict)
                replica.unloading.add(choice.evict)  # its slot stays taken until it is gone
                replica.evicting.add(choice.evict)
            task = asyncio.get_running_loop().create_task(
                self._load(name, tracker, replica, future, choice.evict),
                name=f"load {name} on {tracker.label}",
            )
            self._loads.add(task)
            task.add_done_callback(self._loads.discard)
        return tracker

    async def ready(self, name: str, tracker: EndpointTracker) -> None:
        """Return once ``name`` is loaded on ``tracker``; raises :class:`LoadRefused`, or
        :class:`AdapterWithdrawn` when the declaration dropped it meanwhile."""
        future = self._replica(tracker.key).loading.get(name)
        if future is not None:
            # Shielded: a request that leaves does not stop the load the others need.
            await asyncio.shield(future)
        if name not in self.declared:
            raise self._withdrawn(name)

    async def _load(
        self,
        name: str,
        tracker: EndpointTracker,
        replica: _Replica,
        future: asyncio.Future[None],
        evict: str | None,
    ) -> None:
        """Make room (unload ``evict``), then load ``name``; the outcome goes to ``future``."""
        source = self.sources.get(name)
        try:
            if source is None:  # withdrawn before the load began: nothing evicted
                if evict is not None:
                    replica.unloading.discard(evict)
                    replica.evicting.discard(evict)
                    replica.loaded.add(evict)
                raise self._withdrawn(name)
            if evict is not None:
                try:
                    gone = await self.io.unload(tracker.base_url, evict)
                finally:
                    replica.unloading.discard(evict)
                    replica.evicting.discard(evict)
                if not gone:
                    replica.loaded.add(evict)  # still there: the load would pass max_loras
                    raise LoadRefused(f"{tracker.label} did not unload {evict!r} to make room")
                # Gone now, whatever a look that began before this says.
                replica.touched[evict] = (self._clock(), False)
            await self.io.load(tracker.base_url, name, source)
        except LoadRefused as exc:
            replica.refused[name] = (self._clock(), str(exc))
            self._report(str(exc))
            log.warning("LoRA adapter %r taken off replica %s: %s", name, tracker.label, exc)
            _settle(future, exc)
        except AdapterWithdrawn as exc:
            _settle(future, exc)
        except asyncio.CancelledError:
            _settle(future, LoadRefused(f"the load of {name!r} was abandoned"))
            raise
        except Exception as exc:  # a fault of ours: the request chooses again
            log.exception("loading LoRA adapter %r on %s failed", name, tracker.label)
            _settle(future, LoadRefused(f"the load of {name!r} failed: {exc!r}"))
        else:
            replica.loaded.add(name)
            replica.touched[name] = (self._clock(), True)
            _settle(future, None)
        finally:
            if replica.loading.get(name) is future:
                del replica.loading[name]
            self._changed()

    def _report(self, refusal: str) -> None:
        if len(self.refusals) < MAX_REPORTED_REFUSALS:
            self.refusals.append(refusal)

    def never(
        self, name: str, ready: Sequence[EndpointTracker], known: Iterable[EndpointTracker]
    ) -> HoldError | None:
        """Why the replicas there are can never serve a request for ``name``, or None
        while one may (module docstring, "Never, said at once")."""
        if name not in self.declared:
            return self._withdrawn(name)
        if not ready or any(t not in ready and not t.draining for t in known):
            return None  # at zero, or a replica starting or asleep: one to come may serve it
        now = self._clock()
        unsupported = 0
        said: list[str] = []
        for tracker in ready:
            replica = self._replicas.get(tracker.key)
            if replica is None:
                return None  # neither looked at nor asked yet
            if replica.looked and replica.max_loras <= 0:
                unsupported += 1
                continue
            why = replica.refused_now(name, now)
            if why is None:
                return None
            said.append(why)
        if not said:
            return self._unsupported(unsupported, now)
        more = f"; {unsupported} more publish no LoRA support: {LORA_FIX}" if unsupported else ""
        return AdapterLoadFailed(
            f"every ready replica of {self.target} refused to load {name!r} within the last "
            f"{REFUSAL_HOLD_S:g}s; the last said: {said[-1]}{more}"
        )

    def _unsupported(self, replicas: int, now: float) -> LoraUnsupported:
        cause = (
            f"no replica of {self.target} can load LoRA adapters: none of its {replicas} ready "
            "replica(s) publishes LoRA support (vllm:lora_requests_info)"
        )
        said = self._unsupported_said_at
        if said is None or now - said >= REFUSAL_HOLD_S:
            self._unsupported_said_at = now
            self._report(f"{cause}; {LORA_FIX}")
            log.warning("%s; %s", cause, LORA_FIX)
        return LoraUnsupported(f"{cause}; {LORA_FIX}")

    def take_refusals(self) -> list[str]:
        """The refusals since the last call (the reporter sends them to the scaler)."""
        taken, self.refusals = self.refusals, []
        return taken

    def done(self, name: str, tracker: EndpointTracker) -> None:
        """A request for ``name`` on ``tracker`` ended (or never went out)."""
        replica = self._replica(tracker.key)
        replica.ours[name] -= 1
        if replica.ours[name] <= 0:
            del replica.ours[name]
        replica.last_used[name] = self._clock()

    # -- learning and the keep-alive ----------------------------------------------------

    async def refresh(
        self, ready: Sequence[EndpointTracker], known: Collection[str]
    ) -> list[tuple[str, str]]:
        """Learn each ready replica's adapters, then unload the idle; the (replica, adapter)
        pairs unloaded. ``known``: every endpoint the target lists (``host:port``), ready
        or not: what is known of one out of rotation for a moment is kept."""
        for key in [k for k in self._replicas if k not in known]:
            if not self._replicas[key].loading:
                del self._replicas[key]  # gone: a new replica there starts empty
        unloaded: list[tuple[str, str]] = []
        for tracker in ready:
            began = self._clock()
            try:
                loaded, info = await self.io.look(tracker.base_url)
            except Exception as exc:  # a replica's bad answer: keep what we knew
                log.info("could not read LoRA adapters of %s: %r", tracker.label, exc)
                continue
            replica = self._replica(tracker.key)
            self._learn(replica, loaded, info, began)
            if info is None:
                # No LoRA there: a load under way can only be refused; its requests
                # need not wait for the server to say so (the load's own end is moot).
                for future in replica.loading.values():
                    _settle(future, LoadRefused(f"{tracker.label} publishes no LoRA support"))
                replica.loading.clear()
            unloaded += [(tracker.label, n) for n in await self._unload_idle(tracker, replica)]
        self._changed()
        return unloaded

    def _learn(
        self, replica: _Replica, loaded: frozenset[str], info: LoraInfo | None, began: float
    ) -> None:
        """What a look that began at ``began`` found, over what this activator did since."""
        now = self._clock()
        seen = set(loaded)
        for name, (at, is_loaded) in replica.touched.items():
            if at >= began:  # changed by us while it was looked at: ours is newer
                (seen.add if is_loaded else seen.discard)(name)
        replica.touched = {n: t for n, t in replica.touched.items() if t[0] >= began}
        for name in seen - replica.loaded:
            replica.last_used.setdefault(name, now)  # idle from when first seen
        replica.loaded = seen - replica.evicting
        replica.max_loras = info.max_lora if info is not None else 0
        replica.looked = True
        replica.server_busy = info.running | info.waiting if info is not None else frozenset()

    async def _unload_idle(self, tracker: EndpointTracker, replica: _Replica) -> list[str]:
        """Unload what has been idle past the keep-alive on ``tracker``; the names unloaded."""
        now = self._clock()
        view = replica.view(tracker.in_flight, now)
        due = idle_adapters(view, managed=self.declared, keep_alive_s=self.keep_alive_s, now=now)
        unloaded = []
        for name in due:
            if name in replica.loading or replica.ours[name]:
                continue
            replica.unloading.add(name)
            try:
                gone = await self.io.unload(tracker.base_url, name)
            finally:
                replica.unloading.discard(name)
            if gone:
                replica.loaded.discard(name)
                replica.touched[name] = (self._clock(), False)
                replica.last_used.pop(name, None)
                unloaded.append(name)
        return unloaded


def _settle(future: asyncio.Future[None], exc: BaseException | None) -> None:
    """The outcome of a load, to every request awaiting it (unless already answered)."""
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)
        future.exception()  # retrieved: the waiters each raise it themselves
