"""Readings from every source -> the policy's signals for one target (DESIGN §4).

- **concurrency** = max(activator concurrency, server running + waiting).
  Never the sum: a request the activator forwarded is running on a server, and
  adding both views would count it twice. The larger view wins because each
  can miss requests the other sees (the activator misses traffic that bypasses
  it; the servers miss requests still held in the activator).
- **queue depth** = activator buffered + server waiting (Triton: pending): those
  are different requests (held before a replica, queued inside one).
- **KV cache utilization**: the server view; **GPU utilization**: Prometheus
  (DCGM) when configured, else the server view (Triton's ``nv_gpu_utilization``).

Main decision, freshness: a signal is *complete* only when every source that
contributes to it is fresh. The value is still recorded when some contributor
is stale (it can raise the scale), but the freshness rule
(:mod:`scaler.policy.freshness`) marks the reading not
fresh so the policy never lowers on it.

The servers' TTFT histogram is passed through as it is (the scrape's new
first tokens per bound); :func:`share_within` reads from it how many came
within a model's objective, for the attainment SLO-first scaling reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scaler.policy.api import Demand, SignalKind
from scaler.signals.base import SourceReading
from scaler.signals.names import ACTIVATOR, PROMETHEUS, SCRAPE

__all__ = ["CombinedSignals", "combine", "fed_by", "share_within"]


_ALL_KINDS = frozenset(SignalKind)
_COUNTS = frozenset({SignalKind.CONCURRENCY, SignalKind.QUEUE_DEPTH})


def fed_by(source: str, *, prometheus: bool) -> frozenset[SignalKind]:
    """The signals whose combined value changes when ``source`` brings news.

    The hub records only these at that source's arrival, so that a
    slow source's last value is not recorded again at every faster arrival
    (GPU utilization from Prometheus would otherwise be re-sampled at every
    activator report). The server view feeds GPU utilization only when no
    Prometheus is configured (Triton's ``nv_gpu_utilization``). A source of
    another name (a test's fake) feeds everything.
    """
    if source == ACTIVATOR:
        return _COUNTS
    if source == SCRAPE:
        if prometheus:
            return _COUNTS | {SignalKind.KV_CACHE_UTILIZATION}
        return _ALL_KINDS
    if source == PROMETHEUS:
        return frozenset({SignalKind.GPU_UTILIZATION})
    return _ALL_KINDS


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
    # The servers' new first tokens per TTFT bound (the scrape's; see SourceReading).
    ttft_new: tuple[tuple[float, float], ...] = ()


def _merge(
    contributors: list[SourceReading], value: list[float | None]
) -> tuple[list[float], bool]:
    present = [v for v in value if v is not None]
    return present, all(r.fresh for r in contributors)


def combine(readings: Mapping[str, SourceReading | None]) -> CombinedSignals:
    """Combine the readings of one target (keyed by source name, ``None``: not expected)."""
    act = readings.get(ACTIVATOR)
    scrape = readings.get(SCRAPE)
    prom = readings.get(PROMETHEUS)
    values: dict[SignalKind, float] = {}
    complete: dict[SignalKind, bool] = {}

    counted = [r for r in (act, scrape) if r is not None]
    conc, conc_ok = _merge(counted, [r.concurrency for r in counted])
    if conc:
        values[SignalKind.CONCURRENCY] = max(conc)
    complete[SignalKind.CONCURRENCY] = conc_ok and len(conc) == len(counted) and bool(counted)
    queue, queue_ok = _merge(counted, [r.queue_depth for r in counted])
    if queue:
        values[SignalKind.QUEUE_DEPTH] = sum(queue)
    complete[SignalKind.QUEUE_DEPTH] = queue_ok and len(queue) == len(counted) and bool(counted)

    if scrape is not None and scrape.kv_cache_utilization is not None:
        values[SignalKind.KV_CACHE_UTILIZATION] = scrape.kv_cache_utilization
    complete[SignalKind.KV_CACHE_UTILIZATION] = scrape is not None and scrape.fresh

    gpu_source = prom if prom is not None else scrape
    if gpu_source is not None and gpu_source.gpu_utilization is not None:
        values[SignalKind.GPU_UTILIZATION] = gpu_source.gpu_utilization
    complete[SignalKind.GPU_UTILIZATION] = gpu_source is not None and gpu_source.fresh

    present = [r for r in (act, scrape, prom) if r is not None]
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
        activators=act.reporters if act is not None else 0,
        pod_load=pod_load,
        observed=observed,
        ttft_new=scrape.ttft_new if scrape is not None else (),
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
