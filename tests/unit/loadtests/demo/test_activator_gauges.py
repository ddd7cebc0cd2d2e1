"""Reading held and in-flight requests from the activator's own exposition.

Covers: the gauges of one target are read from text the activator's real
``Metrics`` class produces (so a renamed metric or label breaks this test,
not the demo); other targets are ignored; a target not listed yet reads as
zero; text that is not Prometheus exposition is an error.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from activator.holding.target import Target
from activator.metrics import Metrics
from activator.targets import TargetSpec
from loadtests.demo.activator_gauges import HeldRequests, parse_gauges


def exposition(counts: dict[str, tuple[int, int]]) -> str:
    targets = {}
    for name, (buffered, in_flight) in counts.items():
        target = Target(TargetSpec(name=name, max_buffered=100))
        target.gate.buffered, target.gate.in_flight = buffered, in_flight
        targets[name] = target
    registry = CollectorRegistry()
    Metrics(registry, targets=lambda: targets)
    return generate_latest(registry).decode()


def test_reads_one_targets_gauges() -> None:
    text = exposition({"default/llama": (3, 5), "default/other": (7, 11)})
    assert parse_gauges(text, "default/llama") == HeldRequests(buffered=3, in_flight=5)
    assert parse_gauges(text, "default/other") == HeldRequests(buffered=7, in_flight=11)


def test_unknown_target_reads_zero() -> None:
    text = exposition({"default/other": (7, 11)})
    assert parse_gauges(text, "default/llama") == HeldRequests(buffered=0, in_flight=0)


def test_garbage_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_gauges('tidal_activator_requests_buffered{target="x" 1\n', "x")
