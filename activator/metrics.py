"""Prometheus metrics of the activator, around an injected ``CollectorRegistry``.

Names follow docs/metrics.md with the ``tidal_activator_`` prefix; label values are
bounded: ``target`` is one of the configured targets (or empty when none
matched), ``code`` is a status class (``2xx`` ... ``5xx``, or ``cut``: the
answer was cut before its end, its reason in ``requests_cut``), ``reason`` comes
from :data:`REASONS`.

The hot path touches only pre-resolved children: label lookups are cached in
dictionaries, so a request costs a dict hit plus the increment. The two
families every request touches (the request counter and the duration
histogram) are not prometheus_client instruments at all: :meth:`Metrics.observe`
adds to plain per-target integers (the histogram's bucket found by
bisection, with the same rule as ``Histogram.observe``) and a collector
turns them into the two families when the registry is collected, so every
scrape reads exact totals. (A prometheus_client ``inc`` or ``observe`` takes
a lock and, for a histogram, walks the buckets in Python: a few microseconds
per request, on the path whose cost ``make bench`` measures.) Gauges of held and
in-flight requests are not updated per request either: a custom collector
reads the targets (their gates and specs) when Prometheus scrapes.

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
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from activator.holding.target import Target
from activator.statuses import ERROR_STATUS

__all__ = ["CUT_REASONS", "REASONS", "Metrics", "merge_expositions"]

PREFIX = "tidal_activator_"

# Why the activator answered a request itself instead of relaying a replica's
# answer: the codes of its status table, in table order.
REASONS = tuple(dict.fromkeys(spec.code for spec in ERROR_STATUS.values()))
# Why a request's answer was cut before its end (activator/forwarding.py): its client
# left before the answer ended (while held, before it began, or mid-answer and
# it did not end within the grace), its replica failed mid-answer, or the
# activator shut down with it still being served.
CUT_REASONS = ("client_closed", "replica_failed", "shutdown")

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
# The ``le`` label of each bound, written as prometheus_client writes it.
_DURATION_LE = tuple("+Inf" if math.isinf(b) else repr(float(b)) for b in _DURATION_BOUNDS)
_COLD_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600)


class _TargetCollector(Collector):
    def __init__(self, targets: Callable[[], Mapping[str, Target]]) -> None:
        self._targets = targets

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
        # it waits with what the target allows (docs/annotations.md: max-buffered,
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
        # Counted by the prefix balancer in plain integers (nothing per request
        # here); a target balanced by load has no series.
        prefix_routes = CounterMetricFamily(
            PREFIX + "prefix_routes",
            "requests of a target with routing.tidal.dev/balancing: prefix, by how the replica "
            "was chosen: history (where its prefix was sent), ring (its conversation's replica), "
            "spilled (that replica was over the load bound: the next one), least-loaded (every "
            "replica over the bound), held (every replica full), no-prompt (nothing to reuse: "
            "by load)",
            labels=["target", "outcome"],
        )
        held = GaugeMetricFamily(
            PREFIX + "requests_held",
            "requests held, waiting for a replica, by priority class (critical above 0, "
            "standard at 0, sheddable below)",
            labels=["target", "class"],
        )
        # Counted by the gate in plain integers, as the prefix routes are.
        shed = CounterMetricFamily(
            PREFIX + "shed",
            "requests answered 503 shed, by priority class and cause: higher_class (displaced "
            "at max-buffered by a higher class), tenant_share (displaced at max-buffered: its "
            "tenant held more than its share), at_zero (sheddable while no replica was ready, "
            "routing.tidal.dev/shed-at-zero)",
            labels=["target", "class", "cause"],
        )
        for name, target in sorted(self._targets().items()):
            gate = target.gate
            buffered.add_metric([name], gate.buffered)
            for label, n in gate.held_by_class.items():
                held.add_metric([name, label], n)
            for (label, cause), n in sorted(gate.sheds.total.items()):
                shed.add_metric([name, label, cause], n)
            in_flight.add_metric([name], gate.in_flight)
            ready.add_metric([name], len(target.endpoints.ready))
            capacity.add_metric([name], gate.max_buffered)
            timeout.add_metric([name], target.spec.cold_start_timeout_s)
            if target.prefix is not None:
                for outcome, n in target.prefix.routes.items():
                    prefix_routes.add_metric([name, outcome], n)
        return [buffered, held, in_flight, ready, capacity, timeout, prefix_routes, shed]


class _Totals:
    """One target's answered requests: counts by status class, durations by bucket."""

    __slots__ = ("buckets", "classes", "cut", "total_s")

    def __init__(self) -> None:
        self.classes: dict[int, int] = {}
        self.cut = 0  # requests whose answer was cut before its end
        self.buckets = [0] * len(_DURATION_BOUNDS)  # per bucket, not cumulative; last: +Inf
        self.total_s = 0.0


_COLD_BOUNDS = (*_COLD_BUCKETS, math.inf)
_COLD_LE = tuple("+Inf" if math.isinf(b) else repr(float(b)) for b in _COLD_BOUNDS)


class _HoldWaitCollector(Collector):
    """``hold_wait_seconds`` by target and class, from plain per-bucket counts (each
    held request adds to one integer, as the request totals do)."""

    def __init__(self, waits: Mapping[str, Mapping[str, tuple[list[int], list[float]]]]) -> None:
        self._waits = waits

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(
            PREFIX + "hold_wait_seconds",
            "time a held request waited until a replica took it, by priority class "
            "(critical above 0, standard at 0, sheddable below)",
            labels=["target", "class"],
        )

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        for target, by_label in sorted(self._waits.items()):
            for label, (counts, total) in sorted(by_label.items()):
                cumulative, buckets = 0, []
                for le, n in zip(_COLD_LE, counts, strict=True):
                    cumulative += n
                    buckets.append((le, cumulative))
                family.add_metric([target, label], buckets, total[0])
        return [family]


class _RequestCollector(Collector):
    """``requests_total`` and ``request_duration_seconds`` from the per-target totals."""

    def __init__(self, totals: Mapping[str, _Totals]) -> None:
        self._totals = totals

    def _families(self) -> tuple[CounterMetricFamily, HistogramMetricFamily]:
        requests = CounterMetricFamily(
            PREFIX + "requests",
            "requests that ended, by target and status class: answered by the activator or "
            "relayed to their end (whenever the client closed after it), or code cut: the "
            "answer was cut before its end (tidal_activator_requests_cut_total says why)",
            labels=["target", "code"],
        )
        duration = HistogramMetricFamily(
            PREFIX + "request_duration_seconds",
            "time from request to the end of the response (requests cut before it: none)",
            labels=["target"],
        )
        return requests, duration

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        requests, duration = self._families()
        for target, totals in sorted(self._totals.items()):
            for klass, n in sorted(totals.classes.items()):
                requests.add_metric([target, f"{klass}xx"], n)
            if totals.cut:
                requests.add_metric([target, "cut"], totals.cut)
            cumulative, buckets = 0, []
            for le, n in zip(_DURATION_LE, totals.buckets, strict=True):
                cumulative += n
                buckets.append((le, cumulative))
            duration.add_metric([target], buckets, totals.total_s)
        return [requests, duration]


class Metrics:
    """The activator's instruments."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        targets: Callable[[], Mapping[str, Target]] | None = None,
    ) -> None:
        self.registry = registry
        self._totals: dict[str, _Totals] = {}
        registry.register(_RequestCollector(self._totals))
        self.cold_start_wait = Histogram(
            PREFIX + "cold_start_wait_seconds",
            "time a held request waited for a replica",
            ["target"],
            buckets=_COLD_BUCKETS,
            registry=registry,
        )
        self.rejections = Counter(
            PREFIX + "rejections",
            "requests the activator answered itself, by reason (target empty when refused "
            "before it was routed)",
            ["target", "reason"],
            registry=registry,
        )
        self.cut = Counter(
            PREFIX + "requests_cut",
            "requests whose answer was cut before its end, by reason: client_closed (the "
            "client left while it was held, before its answer began, or mid-answer and the "
            "answer did not end within a second), replica_failed, shutdown",
            ["target", "reason"],
            registry=registry,
        )
        self._cut: dict[tuple[str, str], Counter] = {}
        self.resent = Counter(
            PREFIX + "resent",
            "requests sent again after a replica closed the connection before answering",
            ["target"],
            registry=registry,
        )
        self.activations = Counter(
            PREFIX + "activations",
            "POST /v1/activate calls sent to the scaler, by result (ok, error, refused: "
            "Tidal will not wake the target)",
            ["target", "result"],
            registry=registry,
        )
        self.reports = Counter(
            PREFIX + "stats_reports",
            "POST /v1/stats calls sent to the scaler, by result",
            ["result"],
            registry=registry,
        )
        # By class (groundwork.rules.priority.class_label: three values); the tenant is
        # never a label: tenants are unbounded, and a hash of a credential is
        # still not something to publish. Per bucket, not cumulative (last:
        # +Inf), and the sum in a one-item list.
        self._hold: dict[str, dict[str, tuple[list[int], list[float]]]] = {}
        registry.register(_HoldWaitCollector(self._hold))
        self.bad_priority = Counter(
            PREFIX + "bad_priority",
            "held requests whose x-tidal-priority did not parse (held at the default class)",
            ["target"],
            registry=registry,
        )
        if targets is not None:
            registry.register(_TargetCollector(targets))
        self._cold: dict[str, Histogram] = {}
        self._rejections: dict[tuple[str, str], Counter] = {}

    def observe(self, target: str, status: int, duration_s: float) -> None:
        """Count one answered request (read at the next collection)."""
        totals = self._totals.get(target)
        if totals is None:
            totals = self._totals[target] = _Totals()
        classes = totals.classes
        klass = status // 100
        classes[klass] = classes.get(klass, 0) + 1
        # Histogram.observe's rule: the first bucket whose bound is >= the value.
        totals.buckets[bisect.bisect_left(_DURATION_BOUNDS, duration_s)] += 1
        totals.total_s += duration_s

    def count_cut(self, target: str, reason: str) -> None:
        """Count one request whose answer was cut (``reason`` from :data:`CUT_REASONS`)."""
        key = (target, reason)
        child = self._cut.get(key)
        if child is None:
            if reason not in CUT_REASONS:
                raise ValueError(f"unknown cut reason {reason!r}; known: {CUT_REASONS}")
            child = self._cut[key] = self.cut.labels(target, reason)
        child.inc()
        totals = self._totals.get(target)
        if totals is None:
            totals = self._totals[target] = _Totals()
        totals.cut += 1

    def observe_cold_wait(self, target: str, wait_s: float) -> None:
        hist = self._cold.get(target)
        if hist is None:
            hist = self._cold[target] = self.cold_start_wait.labels(target)
        hist.observe(wait_s)

    def observe_hold(self, target: str, label: str, wait_s: float) -> None:
        """A held request of class ``label`` got a replica after ``wait_s``."""
        by_label = self._hold.get(target)
        if by_label is None:
            by_label = self._hold[target] = {}
        got = by_label.get(label)
        if got is None:
            got = by_label[label] = ([0] * len(_COLD_BOUNDS), [0.0])
        got[0][bisect.bisect_left(_COLD_BOUNDS, wait_s)] += 1
        got[1][0] += wait_s

    def count_bad_priority(self, target: str) -> None:
        self.bad_priority.labels(target).inc()

    def count_resent(self, target: str) -> None:
        self.resent.labels(target).inc()

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
