"""What an endpoint picker's ``/metrics`` says about its InferencePool, read into one value.

The Gateway API Inference Extension puts an endpoint picker (EPP) between
the gateway and an InferencePool's model servers; llm-d's router is the one
most deployments run. Its flow control holds requests by priority band and
fairness flow while the pool is saturated, or has no ready endpoint at all
(then the queue is the pool's scale-from-zero waiting room, bounded by
``noEndpointRequestTTL``). This module turns the router's Prometheus text
into an :class:`EppPoolReading` for one pool. It does no I/O and keeps no
state: the scrape, the clock and what the readings mean for scaling belong
to the caller. docs/gateway-api.md has the table of names, labels and
meanings.

The names and labels are the router's own, from its source: llm-d/llm-d-router
``pkg/epp/metrics/llm_d_router_metrics.go`` (current names, subsystem
``llm_d_epp``), ``pkg/epp/metrics/metrics.go`` (the older twins the router
still writes beside them), ``pkg/epp/framework/plugins/requestcontrol/
dataproducer/inflightload/metrics.go`` (in-flight load) and
``pkg/epp/flowcontrol/types/outcomes.go`` (the ``outcome`` values), at
commit ebab687927f5 of 2026-08-22 (main after v0.10.0; the
``EvictedNoEndpoints`` outcome and ``noEndpointRequestTTL`` arrived after
v0.10.0: an older router counts those evictions as ``EvictedTTL``).

Rules of reading:

1. **Current names first.** The router writes each series twice, under
   ``llm_d_epp_*`` and under its older name (``inference_extension_*``,
   ``inference_pool_*``, ``inference_objective_*``). A family is read under
   its current name when the text has it, else under the older one, never
   both, so nothing counts twice. Routers older than the rename (the
   Inference Extension's own EPP up to v1.x) expose the older names only.
2. **One pool.** Series labelled with a pool (``inference_pool`` on flow
   control, ``name`` on pool gauges) count when the label is the pool asked
   for; series with no pool label (requests, TTFT, in-flight load, and flow
   control before v1.3 of the Inference Extension) are the EPP's own, and an
   EPP serves one pool, so they count for it.
3. **Sums over the other labels.** Queue size and bytes are summed per
   priority over fairness flows and models; outcome counts over
   everything but the outcome; in-flight load over endpoints and flows;
   TTFT buckets over models, flows and streaming.
4. **Outcomes**: the number of requests that left flow control by each
   outcome comes from ``llm_d_epp_flow_control_requests_total`` where the
   router has it (it also counts rejections before a queue item exists),
   else from the count of the queue-duration histogram; the seconds they
   spent in flow control from that histogram's sum.
5. **Absent is None.** A family the text lacks reads as None (not 0): the
   router writes the pool saturation only once flow control is on, and
   in-flight load only with its producer configured.
6. **Only what is read is parsed.** The lines of the families asked for
   (under the one name rule 1 picks) go to the parser and no others: the
   text parser takes about 70 microseconds a line, and a router's page is
   mostly histogram buckets written twice. Reading the waiting room alone
   (queue size and ready endpoints) costs a few percent of the whole page.

Main decision: text that does not parse, or a ``priority`` label that is
not a whole number (the router writes the objective's integer priority),
is an :class:`EppMetricsError` naming what was wrong, so the caller treats
the EPP as unreadable rather than idle.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "DISPATCHED",
    "EVICTED_CONTEXT_CANCELLED",
    "EVICTED_NO_ENDPOINTS",
    "EVICTED_OTHER",
    "EVICTED_TTL",
    "FAMILIES",
    "INFLIGHT_REQUESTS",
    "INFLIGHT_TOKENS",
    "OUTCOMES",
    "POOL_SATURATION",
    "QUEUE_BYTES",
    "QUEUE_DURATION",
    "QUEUE_SIZE",
    "READY_ENDPOINTS",
    "REJECTED_CAPACITY",
    "REJECTED_NO_ENDPOINTS",
    "REJECTED_OTHER",
    "REQUESTS",
    "REQUEST_RUNNING",
    "TTFT",
    "EppMetricsError",
    "EppPoolReading",
    "Family",
    "LatencySummary",
    "OutcomeCount",
    "QueuedBand",
    "read_epp_metrics",
]

# The ``outcome`` label's values (QueueOutcome.String() in the router).
DISPATCHED = "Dispatched"
REJECTED_CAPACITY = "RejectedCapacity"
REJECTED_NO_ENDPOINTS = "RejectedNoEndpoints"
REJECTED_OTHER = "RejectedOther"
EVICTED_TTL = "EvictedTTL"
EVICTED_NO_ENDPOINTS = "EvictedNoEndpoints"
EVICTED_CONTEXT_CANCELLED = "EvictedContextCancelled"
EVICTED_OTHER = "EvictedOther"
OUTCOMES = (
    DISPATCHED,
    REJECTED_CAPACITY,
    REJECTED_NO_ENDPOINTS,
    REJECTED_OTHER,
    EVICTED_TTL,
    EVICTED_NO_ENDPOINTS,
    EVICTED_CONTEXT_CANCELLED,
    EVICTED_OTHER,
)

_FLOW_POOL = "inference_pool"  # flow control's pool label
_GAUGE_POOL = "name"  # the pool gauges' pool label
_MODEL = ("model_name", "target_model_name")


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family as the router writes it: its name, type, labels, and older twin."""

    name: str
    type: str  # "gauge", "counter", "histogram"
    labels: tuple[str, ...]
    legacy: str | None = None
    legacy_labels: tuple[str, ...] = ()


QUEUE_SIZE = Family(
    "llm_d_epp_flow_control_queue_size",
    "gauge",
    ("fairness_id", "priority", _FLOW_POOL, *_MODEL),
    "inference_extension_flow_control_queue_size",
    ("fairness_id", "priority", _FLOW_POOL, *_MODEL),
)
QUEUE_BYTES = Family(
    "llm_d_epp_flow_control_queue_bytes",
    "gauge",
    ("fairness_id", "priority", _FLOW_POOL, *_MODEL),
    "inference_extension_flow_control_queue_bytes",
    ("fairness_id", "priority", _FLOW_POOL, *_MODEL),
)
QUEUE_DURATION = Family(
    "llm_d_epp_flow_control_request_queue_duration_seconds",
    "histogram",
    ("fairness_id", "priority", "outcome", _FLOW_POOL, *_MODEL),
    "inference_extension_flow_control_request_queue_duration_seconds",
    ("fairness_id", "priority", "outcome", _FLOW_POOL, *_MODEL),
)
REQUESTS = Family(
    "llm_d_epp_flow_control_requests_total", "counter", ("outcome", "priority", _FLOW_POOL)
)
POOL_SATURATION = Family(
    "llm_d_epp_flow_control_pool_saturation",
    "gauge",
    (_FLOW_POOL, "stage"),
    "inference_extension_flow_control_pool_saturation",
    (_FLOW_POOL, "stage"),
)
READY_ENDPOINTS = Family(
    "llm_d_epp_ready_endpoints",
    "gauge",
    (_GAUGE_POOL,),
    "inference_pool_ready_pods",
    (_GAUGE_POOL,),
)
INFLIGHT_REQUESTS = Family(
    "llm_d_epp_inflight_requests",
    "gauge",
    ("endpoint_name", "namespace", "producer_name", "fairness_id", "priority"),
)
INFLIGHT_TOKENS = Family(
    "llm_d_epp_inflight_tokens",
    "gauge",
    ("endpoint_name", "namespace", "producer_name", "fairness_id", "priority"),
)
REQUEST_RUNNING = Family(
    "llm_d_epp_request_running",
    "gauge",
    (*_MODEL, "fairness_id", "priority"),
    "inference_objective_running_requests",
    ("model_name",),
)
TTFT = Family(
    "llm_d_epp_request_ttft_seconds",
    "histogram",
    (*_MODEL, "fairness_id", "priority", "streaming"),
)

#: Every family this module reads, in the order docs/gateway-api.md lists them.
FAMILIES = (
    QUEUE_SIZE,
    QUEUE_BYTES,
    QUEUE_DURATION,
    REQUESTS,
    POOL_SATURATION,
    READY_ENDPOINTS,
    INFLIGHT_REQUESTS,
    INFLIGHT_TOKENS,
    REQUEST_RUNNING,
    TTFT,
)


class EppMetricsError(ValueError):
    """An endpoint picker's metrics text could not be read."""


@dataclass(frozen=True, slots=True)
class QueuedBand:
    """Requests held in flow control at one priority (summed over flows and models)."""

    priority: int
    requests: float
    bytes: float


@dataclass(frozen=True, slots=True)
class OutcomeCount:
    """Requests that left flow control with one outcome, since the EPP started."""

    outcome: str
    requests: float
    seconds: float  # their total time in flow control (0 when only counted)


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """A latency histogram since the EPP started: count, sum and cumulative buckets."""

    count: float
    sum_s: float
    buckets: tuple[tuple[float, float], ...]  # (upper bound in s, count at or under), +inf last


@dataclass(frozen=True, slots=True)
class EppPoolReading:
    """One scrape of an EPP, for one pool (see the module docstring for each rule)."""

    pool: str
    queued: tuple[QueuedBand, ...] = ()  # highest priority first
    outcomes: tuple[OutcomeCount, ...] = ()  # in OUTCOMES order, then any others
    saturation: float | None = None  # the "effective" stage: 1.0 is the gating set point
    ready_endpoints: float | None = None
    inflight_requests: float | None = None
    inflight_tokens: float | None = None
    running_requests: float | None = None
    ttft: LatencySummary | None = None
    # The families read under their older names (an older router, or one mid-rename).
    legacy: frozenset[str] = field(default_factory=frozenset)

    @property
    def queued_requests(self) -> float:
        return sum(band.requests for band in self.queued)

    @property
    def queued_bytes(self) -> float:
        return sum(band.bytes for band in self.queued)

    def left(self, outcome: str) -> float:
        """How many requests left flow control with ``outcome`` (0 when none did)."""
        return sum(o.requests for o in self.outcomes if o.outcome == outcome)

    @property
    def evicted_no_endpoints(self) -> float:
        """Requests that waited out ``noEndpointRequestTTL`` with no endpoint to go to."""
        return self.left(EVICTED_NO_ENDPOINTS)


# --- reading --------------------------------------------------------------------------------

Sample = tuple[str, dict[str, str], float]  # sample name, labels, value

_SUFFIXES = {"gauge": ("",), "counter": ("",), "histogram": ("_bucket", "_sum", "_count")}


def _line_name(line: str) -> str:
    """The metric a line of the text is about: a sample's name, or a HELP/TYPE line's."""
    if line.startswith("#"):
        parts = line.split(None, 3)
        return parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
    end = len(line)
    for stop in ("{", " ", "\t"):
        at = line.find(stop)
        if 0 <= at < end:
            end = at
    return line[:end]


def _kept_lines(text: str, families: Iterable[Family]) -> str:
    """Only the lines of the families read, each under one name (rules 1 and 6)."""
    lines = text.splitlines()
    present = {_line_name(line) for line in lines if line and not line.startswith("#")}
    kept: set[str] = set()
    for family in families:
        for name in filter(None, (family.name, family.legacy)):
            names = {name + suffix for suffix in _SUFFIXES[family.type]}
            if names & present:
                kept |= names | {name}
                break
    return "\n".join(line for line in lines if _line_name(line) in kept) + "\n"


def _samples(text: str) -> dict[str, list[Sample]]:
    """Every sample, by the family name the text declares (``_total`` kept on counters)."""
    out: dict[str, list[Sample]] = {}
    try:
        for family in text_string_to_metric_families(text):
            # The parser drops ``_total`` from a counter's family name; the router's
            # names keep it, so index counters by their sample name.
            name = family.name + "_total" if family.type == "counter" else family.name
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue
                out.setdefault(name, []).append(
                    (sample.name, dict(sample.labels), float(sample.value))
                )
    except ValueError as exc:  # prometheus_client raises ValueError on bad text
        raise EppMetricsError(f"unparseable metrics text: {exc}") from exc
    return out


def _for_pool(samples: Iterable[Sample], pool: str, label: str) -> list[Sample]:
    return [s for s in samples if s[1].get(label, pool) == pool]


class _Reader:
    """The samples of one scrape, looked up family by family for one pool."""

    def __init__(self, text: str, pool: str, families: Iterable[Family]) -> None:
        self.samples = _samples(_kept_lines(text, families))
        self.pool = pool
        self.legacy: set[str] = set()

    def family(self, family: Family, pool_label: str = _FLOW_POOL) -> list[Sample] | None:
        """The pool's samples of ``family`` under its current name, else its older one."""
        found = self.samples.get(family.name)
        if found is None and family.legacy is not None:
            found = self.samples.get(family.legacy)
            if found is not None:
                self.legacy.add(family.legacy)
        return None if found is None else _for_pool(found, self.pool, pool_label)

    def total(self, family: Family, pool_label: str = _FLOW_POOL) -> float | None:
        """The sum of the pool's samples of ``family``; None when it has none."""
        found = self.family(family, pool_label)
        return sum(value for _, _, value in found) if found else None


def _priority(labels: dict[str, str], family: str) -> int:
    text = labels.get("priority", "0")
    try:
        return int(text)
    except ValueError:
        raise EppMetricsError(
            f"{family}: priority label {text!r} is not a whole number "
            "(the router writes the objective's integer priority)"
        ) from None


def _queued(reader: _Reader) -> tuple[QueuedBand, ...]:
    requests: dict[int, float] = {}
    sizes: dict[int, float] = {}
    for family, into in ((QUEUE_SIZE, requests), (QUEUE_BYTES, sizes)):
        for _, labels, value in reader.family(family) or ():
            priority = _priority(labels, family.name)
            into[priority] = into.get(priority, 0.0) + value
    return tuple(
        QueuedBand(p, requests.get(p, 0.0), sizes.get(p, 0.0))
        for p in sorted(set(requests) | set(sizes), reverse=True)
    )


def _outcomes(reader: _Reader) -> tuple[OutcomeCount, ...]:
    counts: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for name, labels, value in reader.family(QUEUE_DURATION) or ():
        outcome = labels.get("outcome", "")
        if name.endswith("_count"):
            counts[outcome] = counts.get(outcome, 0.0) + value
        elif name.endswith("_sum"):
            seconds[outcome] = seconds.get(outcome, 0.0) + value
    counted = reader.family(REQUESTS)
    if counted is not None:
        counts = {}
        for _, labels, value in counted:
            outcome = labels.get("outcome", "")
            counts[outcome] = counts.get(outcome, 0.0) + value
    seen = set(counts) | set(seconds)
    order = [o for o in OUTCOMES if o in seen] + sorted(seen - set(OUTCOMES))
    return tuple(OutcomeCount(o, counts.get(o, 0.0), seconds.get(o, 0.0)) for o in order)


def _saturation(reader: _Reader) -> float | None:
    found = reader.family(POOL_SATURATION)
    if not found:
        return None
    effective = [value for _, labels, value in found if labels.get("stage") == "effective"]
    # Before per-stage signals the gauge had no stage label: that one value gates.
    return max(effective or [value for _, _, value in found])


def _latency(reader: _Reader, family: Family) -> LatencySummary | None:
    found = reader.family(family)
    if found is None:
        return None
    count = total = 0.0
    buckets: dict[float, float] = {}
    for name, labels, value in found:
        if name.endswith("_count"):
            count += value
        elif name.endswith("_sum"):
            total += value
        elif name.endswith("_bucket"):
            try:
                bound = float(labels.get("le", "nan"))
            except ValueError:
                continue
            if bound == bound:
                buckets[bound] = buckets.get(bound, 0.0) + value
    return LatencySummary(count, total, tuple(sorted(buckets.items())))


def read_epp_metrics(
    text: str, *, pool: str, families: Collection[Family] = FAMILIES
) -> EppPoolReading:
    """Read an EPP's Prometheus text for InferencePool ``pool`` (its name, not namespaced).

    ``families`` limits the reading to those families (the rest read as
    absent): a caller that polls often for the waiting room alone
    (``QUEUE_SIZE``, ``READY_ENDPOINTS``) pays for the lines of those only.
    """
    reader = _Reader(text, pool, families)
    queued, outcomes, saturation = _queued(reader), _outcomes(reader), _saturation(reader)
    ready = reader.total(READY_ENDPOINTS, _GAUGE_POOL)
    inflight_requests = reader.total(INFLIGHT_REQUESTS)
    inflight_tokens = reader.total(INFLIGHT_TOKENS)
    running = reader.total(REQUEST_RUNNING)
    ttft = _latency(reader, TTFT)
    return EppPoolReading(
        pool=pool,
        queued=queued,
        outcomes=outcomes,
        saturation=saturation,
        ready_endpoints=ready,
        inflight_requests=inflight_requests,
        inflight_tokens=inflight_tokens,
        running_requests=running,
        ttft=ttft,
        legacy=frozenset(reader.legacy),
    )
