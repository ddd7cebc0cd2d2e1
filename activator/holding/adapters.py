"""One target's LoRA adapters on its replicas: which replica a request goes to, loads, unloads.

A target that declares adapters (``routing.tidal.dev/adapters``) gets one
:class:`AdapterSlots`; a target without them has none and pays nothing.

- **Choosing** (:meth:`AdapterSlots.picker`): the gate asks the picker for a
  replica; it runs :func:`activator.balancing.adapter_affinity.choose` over
  what each ready replica has loaded and reserves its choice at once (the
  request counts as in flight for the adapter; a load to do is marked as
  loading, with the adapter it evicts), so the next request sees it. None
  means "hold": the request waits in the gate like any held request.
- **Loading while the request is held** (:meth:`AdapterSlots.ready`): the
  first request that chose a load performs it (unloading the evicted adapter
  first), the others for the same adapter and replica await the same
  future. A refusal takes that replica off for that adapter for
  ``REFUSAL_HOLD_S`` (logged as a warning, and reported to the scaler, which
  raises an ``AdapterLoadRefused`` Warning Event on the Deployment); the
  request then chooses again.
- **Learning and keep-alive** (:meth:`AdapterSlots.refresh`, every few
  seconds from :mod:`activator.holding.adapter_keeper`): each ready
  replica's model list and ``vllm:lora_requests_info`` replace what is known
  of it (what Tidal loaded included: the server is the truth), then adapters
  idle past the keep-alive are unloaded, least recently used first.

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
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from activator.balancing.adapter_affinity import Move, ReplicaAdapters, choose, idle_adapters
from activator.clock import Clock
from activator.replicas.lora_client import LoadRefused
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
    evicting: dict[str, str] = field(default_factory=dict)  # adapter to load -> to unload
    started: set[str] = field(default_factory=set)  # loads under way
    unloading: set[str] = field(default_factory=set)  # unloads under way (idle or evicted)
    refused: dict[str, float] = field(default_factory=dict)  # adapter -> when
    # Loads (True) and unloads (False) this activator made, and when: a look that
    # began before one ended cannot show it, so it does not override it.
    touched: dict[str, tuple[float, bool]] = field(default_factory=dict)
    last_used: dict[str, float] = field(default_factory=dict)
    ours: Counter[str] = field(default_factory=Counter)
    server_busy: frozenset[str] = frozenset()
    max_loras: int = 1  # until the server says (vllm:lora_requests_info)

    def view(self, in_flight: int, now: float) -> ReplicaAdapters:
        loading = frozenset(self.loading)
        refused = frozenset(n for n, t in self.refused.items() if now - t < REFUSAL_HOLD_S)
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
    """The gate's picker for one adapter's requests (see :meth:`AdapterSlots.picker`)."""

    __slots__ = ("name", "slots")

    def __init__(self, slots: AdapterSlots, name: str) -> None:
        self.slots = slots
        self.name = name

    def pick(
        self, ready: Sequence[EndpointTracker], limit: int, rng: random.Random
    ) -> EndpointTracker | None:
        return self.slots.pick(self.name, ready, limit)

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
    ) -> None:
        self.io = io
        self._clock = clock
        self._replicas: dict[str, _Replica] = {}
        # Refusals since the last report to the scaler, which raises them as Events.
        self.refusals: list[str] = []
        self.configure(adapters, keep_alive_s)

    def configure(self, adapters: tuple[Adapter, ...], keep_alive_s: float) -> None:
        self.sources = {a.name: a.source for a in adapters}
        self.declared = frozenset(self.sources)
        self.keep_alive_s = keep_alive_s

    def _replica(self, key: str) -> _Replica:
        found = self._replicas.get(key)
        if found is None:
            found = self._replicas[key] = _Replica()
        return found

    def loaded_on(self, key: str) -> frozenset[str]:
        """What is known loaded on the replica ``key`` (``host:port``)."""
        replica = self._replicas.get(key)
        return frozenset(replica.loaded) if replica else frozenset()

    # -- the request path ---------------------------------------------------------------

    def picker(self, name: str) -> AdapterPicker:
        return AdapterPicker(self, name)

    def pick(
        self, name: str, ready: Sequence[EndpointTracker], limit: int
    ) -> EndpointTracker | None:
        """Choose and reserve a replica for a request for ``name``; None: hold it."""
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
            replica.loading[name] = asyncio.get_running_loop().create_future()
            if choice.evict is not None:
                replica.evicting[name] = choice.evict
                replica.loaded.discard(choice.evict)
        return tracker

    async def ready(self, name: str, tracker: EndpointTracker) -> None:
        """Return once ``name`` is loaded on ``tracker``; raises :class:`LoadRefused`."""
        replica = self._replica(tracker.key)
        future = replica.loading.get(name)
        if future is None:
            return
        if name in replica.started:
            await asyncio.shield(future)
            return
        replica.started.add(name)
        try:
            evict = replica.evicting.pop(name, None)
            if evict is not None:
                replica.unloading.add(evict)
                try:
                    gone = await self.io.unload(tracker.base_url, evict)
                finally:
                    replica.unloading.discard(evict)
                if not gone:
                    replica.loaded.add(evict)  # still there: the load would pass max_loras
                    raise LoadRefused(f"{tracker.label} did not unload {evict!r} to make room")
                # Gone now, whatever a look that began before this says.
                replica.loaded.discard(evict)
                replica.touched[evict] = (self._clock(), False)
            await self.io.load(tracker.base_url, name, self.sources[name])
        except BaseException as exc:
            if not isinstance(exc, LoadRefused):  # cancelled: the others choose again
                future.set_exception(LoadRefused(f"the load of {name!r} was abandoned"))
                future.exception()
                raise
            replica.refused[name] = self._clock()
            if len(self.refusals) < MAX_REPORTED_REFUSALS:
                self.refusals.append(str(exc))
            log.warning("LoRA adapter %r taken off replica %s: %s", name, tracker.label, exc)
            future.set_exception(exc)
            future.exception()  # retrieved: the waiters each raise it themselves
            raise
        else:
            replica.loaded.add(name)
            replica.touched[name] = (self._clock(), True)
            future.set_result(None)
        finally:
            replica.started.discard(name)
            del replica.loading[name]

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
            now = self._clock()
            seen = set(loaded)
            for name, (at, is_loaded) in replica.touched.items():
                if at >= began:  # changed by us while it was looked at: ours is newer
                    (seen.add if is_loaded else seen.discard)(name)
            replica.touched = {n: t for n, t in replica.touched.items() if t[0] >= began}
            for name in seen - replica.loaded:
                replica.last_used.setdefault(name, now)  # idle from when first seen
            replica.loaded = seen - set(replica.evicting.values())
            replica.max_loras = info.max_lora if info is not None else 0
            replica.server_busy = info.running | info.waiting if info is not None else frozenset()
            view = replica.view(tracker.in_flight, now)
            due = idle_adapters(
                view, managed=self.declared, keep_alive_s=self.keep_alive_s, now=now
            )
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
                    unloaded.append((tracker.label, name))
        return unloaded
