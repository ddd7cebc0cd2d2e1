"""Readings from every source -> the policy's signals for one target.

The rule knows no source by name: each source says which signals it
measures (:attr:`~scaler.signals.base.DemandSource.feeds`), and every signal
is combined from the sources that measure it.

- **Counts add views, never requests twice.** *Concurrency* is the largest
  of the views (activator concurrency, server running + waiting), never the
  sum: a request the activator forwarded is running on a server, and adding
  both views would count it twice. The larger view wins because each can
  miss requests the other sees (the activator misses traffic that bypasses
  it; the servers miss requests still held in the activator). *Queue depth*
  is the sum (activator buffered + server waiting, Triton: pending): those
  are different requests, held before a replica and queued inside one.
- **A utilization comes from its most direct source**: of the sources that
  measure it, the one that measures the fewest signals. GPU utilization is
  DCGM's (through Prometheus, which measures nothing else) when configured,
  else the server's own gauge (Triton's ``nv_gpu_utilization``); KV cache
  utilization is the servers'.

Main decision, freshness: a signal is *complete* only when every source that
contributes to it is fresh. The value is still recorded when some contributor
is stale (it can raise the scale), but the freshness rule
(:mod:`scaler.policy.freshness`) marks the reading not
fresh so the policy never lowers on it.

The levels (:class:`~scaler.signals.base.Levels`) are views of the same
servers: each is the largest any source gives, as concurrency is.
:func:`share_within` reads from a TTFT histogram how many first tokens
came within a model's objective, for the attainment SLO-first scaling
reports; :func:`utilization_bounds` gives each utilization the freshness
bound of its most direct source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields

from scaler.policy.api import Demand, SignalKind
from scaler.signals.base import COUNTS, Levels, SourceReading

__all__ = [
    "CombinedSignals",
    "Fed",
    "combine",
    "fed_by",
    "largest_levels",
    "share_within",
    "utilization_bounds",
]

#: One source's reading (``None``: not expected for this target) with the
#: signals that source measures.
Fed = tuple[frozenset[SignalKind], SourceReading | None]

_UTILIZATIONS = frozenset(SignalKind) - COUNTS
#: How each count is combined over the sources that measure it (module docstring).
_COUNT_RULES: Mapping[SignalKind, Callable[[Iterable[float]], float]] = {
    SignalKind.CONCURRENCY: max,
    SignalKind.QUEUE_DEPTH: sum,
}


def _most_direct(kind: SignalKind, feeds: Sequence[frozenset[SignalKind] | None]) -> int | None:
    """Of the sources measuring ``kind`` (``None``: not present), the index of the
    one that measures fewest signals (the first of equals)."""
    measuring = [(len(f), i) for i, f in enumerate(feeds) if f is not None and kind in f]
    return min(measuring)[1] if measuring else None


def fed_by(source: int, every: Sequence[frozenset[SignalKind]]) -> frozenset[SignalKind]:
    """The signals whose combined value changes when ``every[source]`` brings news.

    The hub records only these at that source's arrival, so that a slow
    source's last value is not recorded again at every faster arrival (GPU
    utilization from Prometheus would otherwise be re-sampled at every
    activator report): a source feeds the counts it measures and the
    utilizations it is the most direct source of.
    """
    feeds = every[source]
    direct = {kind for kind in feeds & _UTILIZATIONS if _most_direct(kind, every) == source}
    return frozenset((feeds & COUNTS) | direct)


def utilization_bounds(
    every: Sequence[frozenset[SignalKind]], bounds: Sequence[float | None]
) -> dict[SignalKind, float]:
    """Per utilization, how recent its latest sample must be: the bound of the source it
    comes from (``bounds[i]``: source ``i``'s, ``None`` for the hub's own). A utilization
    is sampled only when its most direct source arrives, so a source polled every 5 s
    needs a bound of its own; the counts arrive with every activator report."""
    out = {}
    for kind in _UTILIZATIONS:
        direct = _most_direct(kind, every)
        bound = bounds[direct] if direct is not None else None
        if bound is not None:
            out[kind] = bound
    return out


@dataclass(frozen=True, slots=True)
class CombinedSignals:
    values: Mapping[SignalKind, float]  # what to record now; kinds with no data are absent
    complete: Mapping[SignalKind, bool]  # every contributor fresh
    demand: Demand
    activators: int = 0  # activators reporting
    pod_load: Mapping[str, float] = field(
        default_factory=dict
    )  # pod -> requests, for deletion cost
    observed: Mapping[str, float] = field(default_factory=dict)  # raw values, named with units
    levels: Levels = field(default_factory=Levels)  # the largest view of each


def _count(kind: SignalKind, readings: Sequence[Fed]) -> tuple[list[float], bool]:
    """The values of a count from every source measuring it, and whether all of
    them answered fresh with a value."""
    counted = [r for feeds, r in readings if kind in feeds and r is not None]
    present = [r.signals[kind] for r in counted if kind in r.signals]
    complete = bool(counted) and len(present) == len(counted) and all(r.fresh for r in counted)
    return present, complete


def largest_levels(present: Sequence[SourceReading]) -> Levels:
    """Each level's largest view over the sources that give it."""
    largest: dict[str, float] = {}
    for reading in present:
        for spec in fields(Levels):
            value = getattr(reading.levels, spec.name)
            if value is not None:
                largest[spec.name] = max(value, largest.get(spec.name, value))
    return Levels(**largest)


def combine(readings: Sequence[Fed]) -> CombinedSignals:
    """Combine one target's readings, each with the signals its source measures."""
    values: dict[SignalKind, float] = {}
    complete: dict[SignalKind, bool] = {}
    for kind, rule in _COUNT_RULES.items():
        got, complete[kind] = _count(kind, readings)
        if got:
            values[kind] = rule(got)
    for kind in (SignalKind.KV_CACHE_UTILIZATION, SignalKind.GPU_UTILIZATION):
        direct = _most_direct(kind, [feeds if r is not None else None for feeds, r in readings])
        source = readings[direct][1] if direct is not None else None
        if source is not None and kind in source.signals:
            values[kind] = source.signals[kind]
        complete[kind] = source is not None and source.fresh
    present = [r for _, r in readings if r is not None]
    pod_load: dict[str, float] = {}
    observed: dict[str, float] = {}
    for r in present:
        observed.update(r.observed)
        for pod, load in r.pod_load.items():
            pod_load[pod] = max(load, pod_load.get(pod, 0.0))
    demand = Demand(
        busy=any(r.busy for r in present),
        all_sources_fresh=bool(present) and all(r.fresh for r in present),
    )
    return CombinedSignals(
        values=values,
        complete=complete,
        demand=demand,
        activators=sum(r.activators for r in present),
        pod_load=pod_load,
        observed=observed,
        levels=largest_levels(present),
    )


def share_within(buckets: Sequence[tuple[float, float]], seconds: float) -> tuple[float, float]:
    """(first tokens within ``seconds``, first tokens counted) from a histogram's
    cumulative ``(bound, count)`` buckets in rising order.

    Exact when ``seconds`` is a bucket bound; between two bounds, the count is
    interpolated linearly, as Prometheus's ``histogram_quantile`` does (vLLM's
    bounds near a TTFT objective are 1, 2.5 and 5 s: an objective of 2 s is
    read between the 1 s and 2.5 s counts).
    """
    if not buckets:
        return 0.0, 0.0
    counted = buckets[-1][1]
    below_bound, below = 0.0, 0.0
    for bound, count in buckets:
        if seconds <= bound:
            if bound == float("inf") or seconds == bound:
                return (count if seconds == bound else below), counted
            part = (seconds - below_bound) / (bound - below_bound)
            return below + (count - below) * part, counted
        below_bound, below = bound, count
    return counted, counted
