"""The event loop behind :mod:`simulator.adapters`: fleets of replicas in simulated time.

One loop serves the three modes; they differ only in where a request goes
(:meth:`_Sim.place`) and what a replica does with it:

- **per-adapter**: a fleet per adapter; the least loaded ready replica with
  room runs the request at once;
- **pinned**: one fleet, the least loaded replica with room; inside it, a
  request whose adapter is not among the ``max_loras`` adapters of its
  running batch waits there (vLLM's scheduler skips it) until one frees;
- **tidal**: one fleet, :func:`activator.balancing.adapter_affinity.choose`
  over what each replica has loaded: sent where it is loaded, or loaded
  first (the request held for the load), or held in the activator;
  :func:`~activator.balancing.adapter_affinity.idle_adapters` unloads those
  idle past the keep-alive.

The scaling rule is the same for every fleet, every 2 s: replicas for the
demand (requests in flight and held) at the target concurrency, at least one
while anything is in flight or held or the fleet was busy within the grace
period, the highest of the last ``scale_down_delay_s`` kept; a new replica
is ready after the cold start. Tidal's fleet also counts adapter slots: at
least enough replicas for the adapters in use or held at ``max_loras`` each
(a replica with every slot busy is full for a new adapter).

Main decision: requests are not decoded token by token; a request takes its
prefill then its service time (output tokens at the step time of a full
batch), which keeps an hour of 100 adapters at a few seconds of CPU.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from dataclasses import dataclass, field

from activator.balancing.adapter_affinity import Move, ReplicaAdapters, choose, idle_adapters
from simulator.adapters import AdapterRequest, FleetParams, ModeResult

__all__ = ["simulate"]

TICK_S = 2.0
_HELD_SCAN = 256  # held requests tried per event: bounds the cost of a long queue


@dataclass
class _Replica:
    created_s: float
    ready_s: float
    in_flight: int = 0
    running: Counter[str] = field(default_factory=Counter)
    server_waiting: deque[int] = field(default_factory=deque)  # pinned: no batch slot yet
    loaded: dict[str, float] = field(default_factory=dict)  # tidal: adapter -> ready at
    last_used: dict[str, float] = field(default_factory=dict)


@dataclass
class _Fleet:
    replicas: dict[int, _Replica] = field(default_factory=dict)
    held: deque[int] = field(default_factory=deque)
    history: deque[tuple[float, int]] = field(default_factory=deque)
    busy_s: float = 0.0  # when it last had work (for the grace period)


class _Sim:
    def __init__(self, requests: list[AdapterRequest], fleet: FleetParams, mode: str) -> None:
        self.requests = requests
        self.p = fleet
        self.mode = mode
        self.end_s = requests[-1].arrival_s if requests else 0.0
        self.ttft: list[float | None] = [None] * len(requests)
        self.fleets: dict[str, _Fleet] = {}
        self.events: list[tuple[float, int, str, int, str]] = []
        self._seq = 0
        self._next_id = 0
        self.gpu_s = 0.0
        self.loads = self.unloads = self.peak = 0
        self._warm_start()

    # --- bookkeeping ---------------------------------------------------------------

    def _push(self, at: float, kind: str, replica: int = -1, text: str = "") -> None:
        self._seq += 1
        heapq.heappush(self.events, (at, self._seq, kind, replica, text))

    def _fleet_of(self, adapter: str) -> str:
        return adapter if self.mode == "per-adapter" else "base"

    def _add_replica(self, fleet: _Fleet, now: float, *, ready_s: float) -> None:
        self._next_id += 1
        fleet.replicas[self._next_id] = _Replica(created_s=now, ready_s=ready_s)

    def _remove(self, fleet: _Fleet, rid: int, now: float) -> None:
        replica = fleet.replicas.pop(rid)
        self._account(replica, now)

    def _account(self, replica: _Replica, until: float) -> None:
        start = max(replica.created_s, self.p.warmup_s)
        self.gpu_s += max(0.0, min(until, self.end_s) - start)

    def _warm_start(self) -> None:
        """Each fleet at the size its mean demand needs, ready at time 0.

        Tidal's also has slots for the adapters expected in flight at once
        (an adapter asked for at rate r is in flight with probability
        1 - exp(-r * mean time), Poisson).
        """
        rate: Counter[str] = Counter()
        by_adapter: Counter[str] = Counter()
        mean_s = 0.0
        for r in self.requests:
            rate[self._fleet_of(r.adapter)] += 1
            by_adapter[r.adapter] += 1
            mean_s += r.prefill_s + r.service_s
        span = max(self.end_s, 1.0)
        mean_s /= max(1, len(self.requests))
        distinct = sum(1 - math.exp(-n / span * mean_s) for n in by_adapter.values())
        for name, count in rate.items():
            fleet = self.fleets[name] = _Fleet()
            n = max(1, math.ceil(count / span * mean_s / self.p.target_concurrency))
            if self.mode == "tidal":
                n = max(n, math.ceil(distinct / self.p.max_loras))
            for _ in range(n):
                self._add_replica(fleet, 0.0, ready_s=0.0)

    # --- placing a request -------------------------------------------------------------

    def _ready(self, fleet: _Fleet, now: float) -> list[tuple[int, _Replica]]:
        return sorted((i, r) for i, r in fleet.replicas.items() if r.ready_s <= now)

    def _start(self, i: int, rid: int, replica: _Replica, at: float) -> None:
        request = self.requests[i]
        self.ttft[i] = at - request.arrival_s + request.prefill_s
        self._push(at + request.prefill_s + request.service_s, "finish", rid, str(i))

    def place(self, i: int, now: float) -> bool:
        """Send request ``i`` somewhere, or say it must be held."""
        adapter = self.requests[i].adapter
        fleet = self.fleets.setdefault(self._fleet_of(adapter), _Fleet())
        ready = self._ready(fleet, now)
        if self.mode == "tidal":
            return self._place_tidal(i, adapter, ready, now)
        roomy = [(rid, r) for rid, r in ready if r.in_flight < self.p.batch]
        if not roomy:
            return False
        rid, replica = min(roomy, key=lambda item: (item[1].in_flight, item[0]))
        replica.in_flight += 1
        if self.mode == "pinned" and not self._fits(replica, adapter):
            replica.server_waiting.append(i)
            return True
        replica.running[adapter] += 1
        self._start(i, rid, replica, now)
        return True

    def _fits(self, replica: _Replica, adapter: str) -> bool:
        return adapter in replica.running or len(replica.running) < self.p.max_loras

    def _place_tidal(
        self, i: int, adapter: str, ready: list[tuple[int, _Replica]], now: float
    ) -> bool:
        views = [
            ReplicaAdapters(
                loaded=frozenset(r.loaded),
                max_loras=self.p.max_loras,
                in_flight=r.in_flight,
                busy=frozenset(r.running),
                last_used=r.last_used,
            )
            for _, r in ready
        ]
        choice = choose(adapter, views, self.p.batch)
        if choice is None:
            return False
        rid, replica = ready[choice.index]
        if choice.move is Move.LOAD:
            if choice.evict is not None:
                del replica.loaded[choice.evict]
                replica.last_used.pop(choice.evict, None)
                self.unloads += 1
            replica.loaded[adapter] = now + self.p.load_s
            self.loads += 1
        replica.in_flight += 1
        replica.running[adapter] += 1
        replica.last_used[adapter] = now
        self._start(i, rid, replica, max(now, replica.loaded[adapter]))
        return True

    # --- events --------------------------------------------------------------------

    def _finish(self, rid: int, i: int, now: float) -> None:
        adapter = self.requests[i].adapter
        fleet = self.fleets[self._fleet_of(adapter)]
        replica = fleet.replicas[rid]
        replica.in_flight -= 1
        replica.running[adapter] -= 1
        if not replica.running[adapter]:
            del replica.running[adapter]
        replica.last_used[adapter] = now
        waiting, replica.server_waiting = replica.server_waiting, deque()
        for j in waiting:  # vLLM's scheduler: each waiting request that now fits runs
            other = self.requests[j].adapter
            if self._fits(replica, other):
                replica.running[other] += 1
                self._start(j, rid, replica, now)
            else:
                replica.server_waiting.append(j)
        self._release_held(fleet, now)

    def _release_held(self, fleet: _Fleet, now: float) -> None:
        kept: deque[int] = deque()
        tried = 0
        while fleet.held and tried < _HELD_SCAN:
            i = fleet.held.popleft()
            tried += 1
            if not self.place(i, now):
                kept.append(i)
                if self.mode != "tidal":
                    break  # FIFO: what did not fit, nothing after it fits either
        kept.extend(fleet.held)
        fleet.held = kept

    def _scale(self, fleet: _Fleet, now: float) -> None:
        in_flight = sum(r.in_flight for r in fleet.replicas.values())
        demand = in_flight + len(fleet.held)
        if demand:
            fleet.busy_s = now
        desired = math.ceil(demand / self.p.target_concurrency)
        if self.mode == "tidal":
            active = {a for r in fleet.replicas.values() for a in r.running}
            active.update(self.requests[i].adapter for i in fleet.held)
            desired = max(desired, math.ceil(len(active) / self.p.max_loras))
        if demand or now - fleet.busy_s < self.p.grace_s:
            desired = max(desired, 1)
        fleet.history.append((now, desired))
        while fleet.history and fleet.history[0][0] < now - self.p.scale_down_delay_s:
            fleet.history.popleft()
        target = max(d for _, d in fleet.history)
        count = len(fleet.replicas)
        for _ in range(target - count):
            self._add_replica(fleet, now, ready_s=now + self.p.cold_start_s)
        if target < count:
            idle = sorted(
                (r.ready_s <= now, len(r.loaded), rid)
                for rid, r in fleet.replicas.items()
                if r.in_flight == 0
            )
            for _, _, rid in idle[: count - target]:
                self._remove(fleet, rid, now)

    def _tick(self, now: float) -> None:
        if now >= self.p.warmup_s:
            self.peak = max(self.peak, sum(len(f.replicas) for f in self.fleets.values()))
        for fleet in self.fleets.values():
            if self.mode == "tidal":
                self._keep_alive(fleet, now)
            self._scale(fleet, now)
            if fleet.held:
                self._release_held(fleet, now)

    def _keep_alive(self, fleet: _Fleet, now: float) -> None:
        managed = frozenset(a for r in fleet.replicas.values() for a in r.loaded)
        for replica in fleet.replicas.values():
            view = ReplicaAdapters(
                loaded=frozenset(a for a, at in replica.loaded.items() if at <= now),
                max_loras=self.p.max_loras,
                in_flight=replica.in_flight,
                busy=frozenset(replica.running),
                last_used=replica.last_used,
            )
            for name in idle_adapters(
                view, managed=managed, keep_alive_s=self.p.keep_alive_s, now=now
            ):
                del replica.loaded[name]
                replica.last_used.pop(name, None)
                self.unloads += 1

    def run(self) -> ModeResult:
        for i, request in enumerate(self.requests):
            self._push(request.arrival_s, "arrive", -1, str(i))
        t = 0.0
        while t <= self.end_s:
            self._push(t, "tick")
            t += TICK_S
        while self.events:
            now, _, kind, rid, text = heapq.heappop(self.events)
            if kind == "arrive":
                i = int(text)
                fleet = self.fleets.setdefault(self._fleet_of(self.requests[i].adapter), _Fleet())
                # FIFO behind held requests, except where adapters differ in what fits.
                if (fleet.held and self.mode != "tidal") or not self.place(i, now):
                    fleet.held.append(i)
            elif kind == "finish":
                self._finish(rid, int(text), now)
            else:
                self._tick(now)
        for fleet in self.fleets.values():
            for replica in fleet.replicas.values():
                self._account(replica, self.end_s)
        return self._result()

    def _result(self) -> ModeResult:
        scored = [
            t
            for t, r in zip(self.ttft, self.requests, strict=True)
            if r.arrival_s >= self.p.warmup_s
        ]
        met = sum(1 for t in scored if t is not None and t <= self.p.slo_ttft_s)
        waits = sorted(math.inf if t is None else t for t in scored)
        p99 = waits[min(len(waits) - 1, math.ceil(0.99 * len(waits)) - 1)] if waits else 0.0
        return ModeResult(
            mode=self.mode,
            requests=len(scored),
            attainment=met / len(scored) if scored else 1.0,
            gpu_hours=self.gpu_s / 3600.0,
            ttft_p99_s=p99,
            loads=self.loads,
            unloads=self.unloads,
            peak_replicas=self.peak,
        )


def simulate(requests: list[AdapterRequest], fleet: FleetParams, mode: str) -> ModeResult:
    """Serve ``requests`` one way (``per-adapter``, ``pinned`` or ``tidal``) and score it."""
    if mode not in ("per-adapter", "pinned", "tidal"):
        raise ValueError(f"mode must be per-adapter, pinned or tidal; got {mode!r}")
    return _Sim(requests, fleet, mode).run()
