"""Where a request for a LoRA adapter goes, and which adapters to unload: plain functions.

A replica serves an adapter only once it has loaded it; a request for an
adapter the replica has not loaded is a 404 from vLLM. So the choice is made
over what each replica is known to have loaded (learned from the server's
model list and ``vllm:lora_requests_info``, never assumed), in this order:

1. **loaded and room**: among replicas that have the adapter loaded and are
   under the in-flight limit, the least loaded;
2. **a free slot**: else among replicas that may still load an adapter
   (fewer loaded than ``max_loras``) and have room, the least loaded; the
   caller loads it there while the request is held;
3. **an idle slot**: else among replicas whose every slot is taken but where
   some adapter has no request in flight, the least loaded; its least
   recently used idle adapter is unloaded first to make the slot;
4. **hold**: else ``None``: the request waits in the hold queue, as any
   request at zero does, until a slot or a replica frees up.

A replica that refused to load the adapter is never chosen to load it
again, and one that does not have it is never sent a request for it: no
replica is asked for something it would answer with a 404.

Tidal keeps at most ``max_loras`` adapters loaded per replica (vLLM's
batch limit), so every adapter it loaded can run at once and none waits
inside the server for a batch slot; an adapter idle past its keep-alive is
unloaded (:func:`idle_adapters`), least recently used first, so hot adapters
stay. Ties go to the first replica in the caller's order: the caller passes
them in a stable order.

Pure: no clock (``now`` is an argument), no I/O; the simulator runs these
functions as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

__all__ = ["AdapterChoice", "Move", "ReplicaAdapters", "choose", "idle_adapters", "lru_idle"]


@dataclass(frozen=True, slots=True)
class ReplicaAdapters:
    """What is known of one ready replica's adapters.

    ``loaded`` includes adapters being loaded now (a request waits on them,
    and they take a slot); ``busy`` are the adapters with a request in
    flight or waiting there (they are never unloaded); ``last_used`` is when
    each loaded adapter last had a request sent (absent: never, oldest).
    """

    loaded: frozenset[str]
    max_loras: int
    in_flight: int
    busy: frozenset[str] = frozenset()
    refused: frozenset[str] = frozenset()
    last_used: Mapping[str, float] = field(default_factory=dict)
    # Being unloaded: not served there any more, yet its slot is taken until the
    # server has let it go, and it is not loaded there again meanwhile.
    unloading: frozenset[str] = frozenset()


class Move(Enum):
    SEND = "send"  # the adapter is loaded there
    LOAD = "load"  # load it there first (after unloading ``evict``, when set)


@dataclass(frozen=True, slots=True)
class AdapterChoice:
    index: int
    move: Move
    evict: str | None = None


def _room(replica: ReplicaAdapters, limit: int) -> bool:
    return limit <= 0 or replica.in_flight < limit


def lru_idle(replica: ReplicaAdapters) -> str | None:
    """The loaded adapter with nothing in flight, least recently used; None if all are busy."""
    idle = [name for name in replica.loaded if name not in replica.busy]
    if not idle:
        return None
    return min(idle, key=lambda name: (replica.last_used.get(name, float("-inf")), name))


def _least_loaded(candidates: list[tuple[int, ReplicaAdapters]]) -> int | None:
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c[1].in_flight, c[0]))[0]


def choose(adapter: str, replicas: Sequence[ReplicaAdapters], limit: int) -> AdapterChoice | None:
    """Where a request for ``adapter`` goes (see the module docstring); None: hold it."""
    roomy = [(i, r) for i, r in enumerate(replicas) if _room(r, limit)]
    found = _least_loaded([(i, r) for i, r in roomy if adapter in r.loaded])
    if found is not None:
        return AdapterChoice(found, Move.SEND)
    may_load = [
        (i, r)
        for i, r in roomy
        if adapter not in r.refused and adapter not in r.unloading and r.max_loras > 0
    ]
    found = _least_loaded(
        [(i, r) for i, r in may_load if len(r.loaded) + len(r.unloading) < r.max_loras]
    )
    if found is not None:
        return AdapterChoice(found, Move.LOAD)
    evictable = [(i, r) for i, r in may_load if lru_idle(r) is not None]
    found = _least_loaded(evictable)
    if found is not None:
        return AdapterChoice(found, Move.LOAD, evict=lru_idle(replicas[found]))
    return None


def idle_adapters(
    replica: ReplicaAdapters, *, managed: frozenset[str], keep_alive_s: float, now: float
) -> list[str]:
    """Adapters to unload now: managed, nothing in flight, idle ``keep_alive_s`` or more.

    Least recently used first. An adapter with no recorded use is not
    unloaded here (the caller records when it first saw it loaded), and
    adapters Tidal does not manage (loaded by the server's own
    ``--lora-modules``) are left alone.
    """
    due = [
        name
        for name in replica.loaded
        if name in managed
        and name not in replica.busy
        and name in replica.last_used
        and now - replica.last_used[name] >= keep_alive_s
    ]
    return sorted(due, key=lambda name: (replica.last_used[name], name))
