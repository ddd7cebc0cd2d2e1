"""Fixed fleets run once per trace and world: a cache of their runs, in memory and on disk.

A fixed fleet of N replicas (``always-on-N``, every point of the frontier)
does the same thing whichever row asks for it, whatever the objective or
the prices it is scored with, and whichever run of ``tidal simulate`` (or
of a battery of them) asks again. So each such run is kept, keyed by

- the trace's content (every request's time, tokens, model, prompt blocks,
  class and tenant; :meth:`FleetCache.trace_key`),
- the world's settings (engine, hold, placement, seed, ...; a cold start
  and a spot model only where the placement can start a replica after time
  0: an all-on-demand fixed fleet is warm from the start and never
  replaced),
- the fleet size,
- and the simulator's version: a hash of the sources whose behaviour a run
  depends on (the simulator package, and the activator, groundwork and
  placement modules it runs; ``_SOURCES``), so that a changed engine or world never
  serves an old answer.

Main decision: **the disk copy is what makes it pay, and it must be safe to
share.** Each entry is one file under the cache folder, written to a
temporary name in the same folder and renamed into place (``os.replace``
is atomic), so concurrent writers (``--jobs``, two runs at once, a battery)
can only ever leave a whole entry; two writers of one key write the same
bytes. An entry that cannot be read (cut short, an older format) is a miss
and is written again. A run is stored compactly: what the trace already
says (arrivals, tokens, classes) is not stored, and per-request times are
packed arrays.

Where: ``$TIDAL_SIM_CACHE`` when set (``off`` turns the disk copy off),
else ``$XDG_CACHE_HOME/tidal/fleets`` (``~/.cache/tidal/fleets``);
``tidal simulate --fleet-cache DIR`` and ``--no-fleet-cache`` say the
same on the command line. Entries are never expired (a new version writes
new keys); delete the folder to reclaim the space.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path

from simulator.columns import Counts, Reasons, Seconds, Times
from simulator.traces import TraceRequest
from simulator.world import ReplicaLife, RunResult, Second, WorldConfig

__all__ = [
    "CACHE_DIR_ENV",
    "FleetCache",
    "default_cache_dir",
    "simulator_version",
]

CACHE_DIR_ENV = "TIDAL_SIM_CACHE"
#: Bumped when the stored layout changes (the source hash covers behaviour).
_FORMAT = 3
# Runs kept in memory besides the disk (a --cold-start list or a battery
# asks for the same fleets again within one process), up to this many
# requests in all (a day's fleets are read back from disk instead).
_MEMORY_ENTRIES = 16
_MEMORY_REQUESTS = 1_000_000
# Requests hashed at a time (a stream is never held whole).
_CHUNK = 1 << 16

_ROOT = Path(__file__).resolve().parent.parent
# What a fixed fleet's run depends on, besides the trace and the world.
_SOURCES = (
    "simulator",
    "activator/balancing",
    "activator/targets.py",
    "groundwork/fair_hold_queue.py",
    "groundwork/rules",
    "scaler/policy/placement",
    "scaler/policy/api.py",
)

_BATTERY = _ROOT / "simulator" / "battery"


@cache
def simulator_version() -> str:
    """A hash of the sources a simulated run depends on (see the module docstring)."""
    digest = hashlib.sha256(f"format {_FORMAT}".encode())
    for name in _SOURCES:
        path = _ROOT / name
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:
            if _BATTERY in file.parents:
                continue  # the battery judges runs; it changes none
            digest.update(str(file.relative_to(_ROOT)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def default_cache_dir() -> Path | None:
    """``$TIDAL_SIM_CACHE`` (None when it says ``off``), else the user's cache folder."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return None if override.strip().lower() == "off" else Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tidal" / "fleets"


class FleetCache:
    """Runs of fixed fleets by trace, world and size (see the module docstring).

    ``directory`` None keeps them in memory only, for this process.
    """

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._memory: OrderedDict[str, RunResult] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def trace_key(requests: Iterable[TraceRequest]) -> str:
        """A digest of everything in ``requests`` that a run can depend on (one pass)."""
        digest = hashlib.sha256()
        times = array("d")
        tokens = array("q")
        for index, r in enumerate(requests):
            times.append(r.offset_s)
            tokens.append(r.prompt_tokens)
            tokens.append(r.output_tokens)
            if r.model or r.prefix or r.priority or r.tenant:
                digest.update(repr((index, r.model, r.prefix, r.priority, r.tenant)).encode())
            if len(times) == _CHUNK:
                digest.update(times.tobytes() + tokens.tobytes())
                times, tokens = array("d"), array("q")
        digest.update(times.tobytes() + tokens.tobytes())
        return digest.hexdigest()

    def run(
        self,
        requests: Sequence[TraceRequest],
        trace_key: str,
        size: int,
        world: WorldConfig,
        simulate: Callable[[], RunResult],
    ) -> RunResult:
        """The fleet of ``size`` on ``requests`` in ``world``: stored, else ``simulate()``'s."""
        key = _key(trace_key, size, world)
        if key is None:
            return simulate()
        found = self._memory.get(key)
        if found is None:
            found = self._load(key, requests)
        if found is not None:
            self.hits += 1
            self._remember(key, found)
            return found
        self.misses += 1
        result = simulate()
        self._remember(key, result)
        self._store(key, result)
        return result

    def _remember(self, key: str, result: RunResult) -> None:
        self._memory[key] = result
        self._memory.move_to_end(key)
        while len(self._memory) > _MEMORY_ENTRIES or (
            len(self._memory) > 1
            and sum(len(r.arrival_s) for r in self._memory.values()) > _MEMORY_REQUESTS
        ):
            self._memory.popitem(last=False)
        if len(result.arrival_s) > _MEMORY_REQUESTS:
            self._memory.pop(key)

    def _path(self, key: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / key[:2] / f"{key}.fleet"

    def _load(self, key: str, requests: Sequence[TraceRequest]) -> RunResult | None:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            return _unpack(pickle.loads(path.read_bytes()), key, requests)
        except (OSError, EOFError, ValueError, AttributeError, TypeError, pickle.UnpicklingError):
            return None  # cut short, or another format: run it again

    def _store(self, key: str, result: RunResult) -> None:
        path = self._path(key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".part")
            try:
                with os.fdopen(handle, "wb") as out:
                    pickle.dump(_pack(result, key), out, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError:
            pass  # a full or read-only disk costs the reuse, not the run


def _key(trace_key: str, size: int, world: WorldConfig) -> str | None:
    """The entry's name; None where the world cannot be keyed (a custom balancer)."""
    if world.balancer is not None:
        return None
    if world.placement.policy == "on-demand":
        # Warm from the start and never replaced: no cold start, no spot.
        world = replace(world, cold_start=type(world.cold_start)(), spot=type(world.spot)())
    settings = repr(tuple((f.name, getattr(world, f.name)) for f in fields(world)))
    text = f"{simulator_version()}|{trace_key}|{size}|{settings}"
    return hashlib.sha256(text.encode()).hexdigest()


_NONE = math.nan


@dataclass(frozen=True, slots=True)
class _Stored:
    """One fleet's run as stored: what the trace does not already say, packed."""

    key: str
    name: str
    first: array[float]  # per request, NaN: none
    finished: array[float]
    reasons: tuple[str, ...]  # failure reasons; ``failed`` holds index + 1, 0: none
    failed: array[int]
    waits: array[float]
    cold_starts: int
    replicas: tuple[tuple[str, float, float, float, int, int, str, float | None], ...]
    at_s: array[float]  # the timeline, one array per field
    arrivals: array[int]
    concurrency: array[float]
    ready: array[int]
    spec: array[int]
    end_s: float
    preemptions: int
    classes: bool  # the run kept each request's class (the trace has them)
    tenants: bool


def _life_row(r: ReplicaLife) -> tuple[str, float, float, float, int, int, str, float | None]:
    return (
        r.capacity,
        r.created_s,
        r.ended_s,
        r.busy_s,
        r.cached_tokens,
        r.queried_tokens,
        r.shape,
        r.ready_s,
    )


def _pack(result: RunResult, key: str) -> _Stored:
    reasons = tuple(sorted({r for r in result.failed_reason if r is not None}))
    code = {reason: index + 1 for index, reason in enumerate(reasons)}
    line = result.timeline
    return _Stored(
        key=key,
        name=result.name,
        first=array("d", (_NONE if t is None else t for t in result.first_token_s)),
        finished=array("d", (_NONE if t is None else t for t in result.finished_s)),
        reasons=reasons,
        failed=array("B", (0 if r is None else code[r] for r in result.failed_reason)),
        waits=array("d", result.cold_start_wait_s),
        cold_starts=result.cold_starts,
        replicas=tuple(_life_row(r) for r in result.replicas),
        at_s=array("d", (s.at_s for s in line)),
        arrivals=array("q", (s.arrivals for s in line)),
        concurrency=array("d", (s.concurrency for s in line)),
        ready=array("q", (s.ready for s in line)),
        spec=array("q", (s.spec for s in line)),
        end_s=result.end_s,
        preemptions=result.preemptions,
        classes=bool(result.priority),
        tenants=bool(result.tenant),
    )


def _times(values: array[float]) -> tuple[float | None, ...]:
    return tuple(None if math.isnan(t) else t for t in values)


def _unpack(stored: object, key: str, requests: Sequence[TraceRequest]) -> RunResult:
    if not isinstance(stored, _Stored) or stored.key != key:
        raise ValueError("entry stored under another key or format")
    if len(stored.first) != len(requests):
        raise ValueError("entry is for another trace")
    return RunResult(
        name=stored.name,
        arrival_s=Seconds(r.offset_s for r in requests),
        first_token_s=Times(_times(stored.first)),
        finished_s=Times(_times(stored.finished)),
        output_tokens=Counts(r.output_tokens for r in requests),
        failed_reason=Reasons(None if c == 0 else stored.reasons[c - 1] for c in stored.failed),
        cold_start_wait_s=tuple(stored.waits),
        cold_starts=stored.cold_starts,
        replicas=tuple(ReplicaLife(*r) for r in stored.replicas),
        timeline=tuple(
            Second(at_s=a, arrivals=n, concurrency=c, ready=r, spec=s)
            for a, n, c, r, s in zip(
                stored.at_s,
                stored.arrivals,
                stored.concurrency,
                stored.ready,
                stored.spec,
                strict=True,
            )
        ),
        end_s=stored.end_s,
        preemptions=stored.preemptions,
        priority=tuple(r.priority for r in requests) if stored.classes else (),
        tenant=tuple(r.tenant for r in requests) if stored.tenants else (),
    )
