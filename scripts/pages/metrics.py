"""docs/metrics.md: every metric of both services, read back from fresh registries.

Each service's ``Metrics`` registers its instruments in a registry of the
page's own, which records what is registered, in order
(:class:`_RecordingRegistry`): the page lists each metric with its type,
its labels and its help text, as ``/metrics`` serves it.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from activator.metrics import Metrics as ActivatorMetrics
from scaler.metrics import Metrics as ScalerMetrics
from scripts.pages.table import GENERATED, row

__all__ = ["metrics_page"]


class _RecordingRegistry(CollectorRegistry):
    """A registry that keeps its collectors in the order they were registered."""

    def __init__(self) -> None:
        super().__init__()
        self.collectors: list[Collector] = []

    def register(self, collector: Collector) -> None:
        super().register(collector)
        self.collectors.append(collector)


def _families(registry: _RecordingRegistry) -> Iterable[tuple[str, str, tuple[str, ...], str]]:
    """(name, type, label names, help) of every metric registered, in registration order."""
    # prometheus-client keeps a wrapper's label names only on the wrapper, and a
    # labelled family with no child yet has no sample to read them from.
    for collector in registry.collectors:
        labelnames = getattr(collector, "_labelnames", None)
        kind = getattr(collector, "_type", None)
        if labelnames is not None and kind is not None:
            yield (
                str(getattr(collector, "_name", "")),
                str(kind),
                tuple(labelnames),
                str(getattr(collector, "_documentation", "")),
            )
            continue
        for family in collector.collect():
            yield (
                family.name,
                family.type,
                tuple(getattr(family, "_labelnames", ())),
                family.documentation,
            )


def _exposed(name: str, kind: str) -> str:
    if kind == "counter":
        return f"`{name}_total`"
    if kind == "histogram":
        return f"`{name}_bucket`, `_sum`, `_count`"
    return f"`{name}`"


def _metric_rows(registry: _RecordingRegistry) -> list[str]:
    rows = [row("metric", "type", "labels", "meaning"), row("---", "---", "---", "---")]
    for name, kind, labels, doc in _families(registry):
        label_text = ", ".join(f"`{label}`" for label in labels) or "none"
        rows.append(row(_exposed(name, kind), kind, label_text, doc))
    return rows


def metrics_page() -> str:
    """docs/metrics.md: every metric of both services with type, labels and meaning."""
    scaler = _RecordingRegistry()
    ScalerMetrics(scaler)
    activator = _RecordingRegistry()
    ActivatorMetrics(activator, targets=dict)
    lines = [
        "# Metrics",
        "",
        GENERATED.format(source="`scaler/metrics.py` and `activator/metrics.py`"),
        "",
        "The scaler serves `/metrics` on its API port (8090); the activator on its",
        "admin port (9091), never on the data port. With `--workers` the activator",
        "sums its workers' samples. Label values are bounded: `target` is a",
        "`namespace/name` of an opted-in Deployment (its series go when it opts",
        "out), `code` a status class (`2xx`...`5xx`, or `cut`), `reason`, `result`,",
        "`signal`, `direction`, `outcome` and `capacity_type` come from fixed sets.",
        "[`deploy/monitoring/`](../deploy/monitoring/) scrapes them, alerts on",
        "them and draws them.",
        "",
        "The activator counts each request once, by what happened to its answer.",
        "One whose replica's answer ended is counted under its status, however",
        "the client closed after it: benchmark clients close at `data: [DONE]`,",
        "which can reach the activator before the end of the replica's chunked",
        "body, and such an answer is read to its end (for up to a second) rather",
        'than cut. One cut before its end is counted with `code="cut"` in',
        "`tidal_activator_requests_total`, by reason in",
        "`tidal_activator_requests_cut_total` (`client_closed`: the client left",
        "while it was held, before the answer began, or mid-answer and the",
        "answer did not end within that second; `replica_failed`; `shutdown`),",
        "and logged (`cut client_closed (target ml/llama): mid-answer`, one line",
        "per reason and target per 10 s). The duration histogram holds the",
        "answers that ended.",
        "",
        "## Scaler (`tidal_scaler_*`)",
        "",
        *_metric_rows(scaler),
        "",
        "## Activator (`tidal_activator_*`)",
        "",
        *_metric_rows(activator),
        "",
    ]
    return "\n".join(lines)
