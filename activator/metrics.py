"""Prometheus metrics of the activator, around an injected ``CollectorRegistry``.

Names follow DESIGN §8 with the ``tidal_activator_`` prefix; label values are
bounded: ``target`` is one of the configured targets (or empty when none
matched), ``code`` is a status class (``2xx`` ... ``5xx``), ``reason`` comes
from :data:`REASONS`.

The hot path touches only pre-resolved children: label lookups are cached in
dictionaries, so a request costs a dict hit plus the increment. The two
instruments every request touches (the request counter and the duration
histogram) are not even incremented per request: :meth:`Metrics.observe`
adds to plain per-target integers (the histogram's bucket found by
bisection) and those are added into the instruments whenever the registry
is collected (a scrape, ``get_sample_value``), by a collector registered
ahead of them, so every answer read from the registry is exact. (A
prometheus_client ``inc`` or ``observe`` takes a lock and, for a histogram,
walks the buckets in Python: a few microseconds per request.) Gauges of
held and in-flight requests are not updated per request at all: a custom
collector reads the gates when Prometheus scrapes.

With ``--workers`` each worker keeps its own registry; the serving process
sums the workers' samples (:func:`merge_expositions`), which is correct for
nearly every metric here: counters, histograms, the held/in-flight gauges
and the buffer capacity are all sums over workers. The one setting that is
not a quantity, the cold-start timeout, is merged by taking the largest.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from activator.buffering import Gate
from activator.statuses import ERROR_STATUS

__all__ = ["REASONS", "Metrics", "merge_expositions"]

PREFIX = "tidal_activator_"

# Why the activator answered a request itself instead of relaying a replica's
# answer: the codes of its status table, in table order.
REASONS = tuple(dict.fromkeys(spec.code for spec in ERROR_STATUS.values()))

_DURATION_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
)
_DURATION_BOUNDS = (*_DURATION_BUCKETS, math.inf)
_COLD_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600)


class _GateCollector(Collector):
    def __init__(self, gates: Callable[[], Mapping[str, Gate]]) -> None:
        self._gates = gates

    def collect(self) -> Iterable[Metric]:
        buffered = GaugeMetricFamily(
            PREFIX + "requests_buffered", "requests held, waiting for a replica", labels=["target"]
        )
        in_flight = GaugeMetricFamily(
            PREFIX + "requests_in_flight",
            "requests sent to a replica, not finished",
            labels=["target"],
        )
        ready = GaugeMetricFamily(
            PREFIX + "endpoints_ready",
            "replicas this activator sends requests to",
            labels=["target"],
        )
        # The target's limits, so that alerts compare what is held and how long
        # it waits with what the target allows (DESIGN §3: max-buffered,
        # cold-start-timeout) without copying the annotations into the rules.
        capacity = GaugeMetricFamily(
            PREFIX + "buffer_capacity",
            "requests this activator may hold for the target (routing.tidal.dev/max-buffered)",
            labels=["target"],
        )
        timeout = GaugeMetricFamily(
            PREFIX + "cold_start_timeout_seconds",
            "how long a held request may wait (routing.tidal.dev/cold-start-timeout)",
            labels=["target"],
        )
        for name, gate in sorted(self._gates().items()):
            buffered.add_metric([name], gate.buffered)
            in_flight.add_metric([name], gate.in_flight)
            ready.add_metric([name], len(gate.endpoints.ready))
            capacity.add_metric([name], gate.max_buffered)
            timeout.add_metric([name], gate.cold_start_timeout_s)
        return [buffered, in_flight, ready, capacity, timeout]


class _Flush(Collector):
    """Registered before the instruments it feeds: collecting the registry flushes first."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush

    def collect(self) -> Iterable[Metric]:
        self._flush()
        return []


class _Pending:
    """One target's requests since the last flush: counts by status class, durations."""

    __slots__ = ("buckets", "classes", "total_s")

    def __init__(self) -> None:
        self.classes: dict[int, int] = {}
        self.buckets = [0] * (len(_DURATION_BUCKETS) + 1)  # the last one: +Inf
        self.total_s = 0.0


class Metrics:
    """The activator's instruments."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        gates: Callable[[], Mapping[str, Gate]] | None = None,
    ) -> None:
        self.registry = registry
        self._pending: dict[str, _Pending] = {}
        registry.register(_Flush(self.flush))
        self.requests = Counter(
            PREFIX + "requests",
            "requests answered, by target and status class",
            ["target", "code"],
            registry=registry,
        )
        self.duration = Histogram(
            PREFIX + "request_duration_seconds",
            "time from request to the end of the response",
            ["target"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self.cold_start_wait = Histogram(
            PREFIX + "cold_start_wait_seconds",
            "time a held request waited for a replica",
            ["target"],
            buckets=_COLD_BUCKETS,
            registry=registry,
        )
        self.rejections = Counter(
            PREFIX + "rejections",
            "requests the activator answered itself, by reason",
            ["target", "reason"],
            registry=registry,
        )
        self.activations = Counter(
            PREFIX + "activations",
            "POST /v1/activate calls sent to the scaler",
            ["target", "result"],
            registry=registry,
        )
        self.reports = Counter(
            PREFIX + "stats_reports",
            "POST /v1/stats calls sent to the scaler, by result",
            ["result"],
            registry=registry,
        )
        if gates is not None:
            registry.register(_GateCollector(gates))
        self._requests: dict[tuple[str, int], Counter] = {}
        self._durations: dict[str, Histogram] = {}
        self._cold: dict[str, Histogram] = {}
        self._rejections: dict[tuple[str, str], Counter] = {}

    def observe(self, target: str, status: int, duration_s: float) -> None:
        """Count one answered request; it shows in the instruments at the next collection."""
        pending = self._pending.get(target)
        if pending is None:
            pending = self._pending[target] = _Pending()
        classes = pending.classes
        klass = status // 100
        classes[klass] = classes.get(klass, 0) + 1
        # The histogram's own rule: the first bucket whose bound is >= the value.
        pending.buckets[bisect.bisect_left(_DURATION_BOUNDS, duration_s)] += 1
        pending.total_s += duration_s

    def flush(self) -> None:
        """Add the requests counted since the last flush into the instruments."""
        pending, self._pending = self._pending, {}
        for target, counted in pending.items():
            for klass, n in counted.classes.items():
                key = (target, klass)
                child = self._requests.get(key)
                if child is None:
                    child = self._requests[key] = self.requests.labels(target, f"{klass}xx")
                child.inc(n)
            hist = self._durations.get(target)
            if hist is None:
                hist = self._durations[target] = self.duration.labels(target)
            # Histogram has no public "add n observations to a bucket"; its
            # per-bucket values are what observe() increments (a unit test
            # checks the result against observe() itself).
            for index, n in enumerate(counted.buckets):
                if n:
                    hist._buckets[index].inc(n)
            hist._sum.inc(counted.total_s)

    def observe_cold_wait(self, target: str, wait_s: float) -> None:
        hist = self._cold.get(target)
        if hist is None:
            hist = self._cold[target] = self.cold_start_wait.labels(target)
        hist.observe(wait_s)

    def reject(self, target: str, reason: str) -> None:
        key = (target, reason)
        child = self._rejections.get(key)
        if child is None:
            if reason not in REASONS:
                raise ValueError(f"unknown rejection reason {reason!r}; known: {REASONS}")
            child = self._rejections[key] = self.rejections.labels(target, reason)
        child.inc()


# Families whose samples are settings, the same in every worker: merged by max, not summed.
_NOT_ADDITIVE = frozenset({PREFIX + "cold_start_timeout_seconds"})


def merge_expositions(texts: Iterable[str]) -> str:
    """Sum the samples of several text expositions into one (for ``--workers``)."""
    order: list[str] = []
    families: dict[str, tuple[str, str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            entry = families.get(family.name)
            if entry is None:
                entry = families[family.name] = (family.type, family.documentation, {})
                order.append(family.name)
            samples = entry[2]
            for s in family.samples:
                if s.name.endswith("_created"):
                    continue  # a creation time; summing them means nothing
                key = (s.name, tuple(sorted(s.labels.items())))
                if family.name in _NOT_ADDITIVE:
                    samples[key] = max(samples.get(key, s.value), s.value)
                else:
                    samples[key] = samples.get(key, 0.0) + s.value
    return "".join(_render(name, *families[name]) for name in order if families[name][2])


def _render(
    name: str, kind: str, doc: str, samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]
) -> str:
    exposed = name + "_total" if kind == "counter" else name
    lines = [f"# HELP {exposed} {_escape(doc)}", f"# TYPE {exposed} {kind}"]
    for (sample, labels), value in samples.items():
        if labels:
            body = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels)
            lines.append(f"{sample}{{{body}}} {_number(value)}")
        else:
            lines.append(f"{sample} {_number(value)}")
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return _escape(text).replace('"', '\\"')
