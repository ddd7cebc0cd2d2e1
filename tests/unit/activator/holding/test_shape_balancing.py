"""A model on several GPU shapes, balanced by the scaler's word on its endpoints.

Covers: the word's parsing (what is malformed is left out); a target given
the word balances by capacity (a replica of three times the weight carries
about three times the requests) and sends a prompt only one shape reaches
to that shape, even when it is the busier; an endpoint the word does not
name yet is taken as the least shape; a held long prompt waits for a
replica it fits while a short one behind it takes the slice that frees;
with prefix balancing, the prefix router chooses among the replicas that
fit; the word withdrawn, the target balances by load again.

Time is the loop's, faked by looptime.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from activator.holding.request_class import ANONYMOUS
from activator.holding.shape_balancing import ShapeBalancer
from activator.holding.target import HoldTicket, Target
from activator.replicas.readiness import EndpointTracker
from activator.routing.registry import Registry
from activator.targets import Discovered, Endpoint, TargetSpec
from groundwork.rules.stats_report import ShapeRoute

H100 = Endpoint("10.0.0.1", 8000, name="whole", ready=True)
SLICE = Endpoint("10.0.0.2", 8000, name="slice", ready=True)
NEW = Endpoint("10.0.0.3", 8000, name="new", ready=True)
WORD = {
    "ns/m": {
        H100.key: ShapeRoute("h100", 1.0, 8000.0),
        SLICE.key: ShapeRoute("mig-3g.40gb", 1 / 3, 2000.0),
    }
}
LONG = {"model": "m", "prompt": "x" * 4 * 5000}  # about 5,000 tokens
SHORT = {"model": "m", "prompt": "hello"}


def _target(*endpoints: Endpoint, cc: int = 0, balancing: str = "least-loaded") -> Target:
    registry = Registry(rng=random.Random(7), clock=lambda: 0.0)
    registry.set_shapes(WORD)
    spec = TargetSpec(name="ns/m", container_concurrency=cc, balancing=balancing)
    registry.apply({"ns/m": Discovered(spec, endpoints)})
    return registry.targets["ns/m"]


def _take(target: Target, document: object) -> EndpointTracker:
    prompt, _, tokens = target.arrive(document)
    tracker = target.try_take(prompt, tokens)
    assert tracker is not None
    return tracker


def test_capacity_not_count_sets_each_replicas_share() -> None:
    target = _target(H100, SLICE)
    for _ in range(40):
        _take(target, SHORT)  # none finishes: each pick sees the load so far
    carried = {t.label: t.in_flight for t in target.endpoints.ready}
    assert carried == {"whole": 30, "slice": 10}


def test_a_prompt_only_the_fast_shape_reaches_goes_there_though_it_is_busier() -> None:
    target = _target(H100, SLICE)
    for _ in range(6):
        _take(target, SHORT)
    assert all(_take(target, LONG).label == "whole" for _ in range(5))
    assert target.shapes is not None


def test_an_endpoint_the_scaler_has_not_named_is_the_least_shape() -> None:
    balancer = ShapeBalancer(WORD["ns/m"])
    tracker = EndpointTracker(NEW)
    assert (balancer.weight(tracker), balancer.reach(tracker)) == (1 / 3, 2000.0)
    target = _target(SLICE, NEW)
    # Neither reaches the long prompt: it goes to one of the longest reach, either.
    assert _take(target, LONG).label in {"slice", "new"}


@pytest.mark.looptime
async def test_a_held_long_prompt_waits_for_a_replica_it_fits_and_lets_others_pass() -> None:
    target = _target(H100, SLICE, cc=1)
    whole, piece = _take(target, SHORT), _take(target, SHORT)
    assert {whole.label, piece.label} == {"whole", "slice"}
    if whole.label != "whole":
        whole, piece = piece, whole
    tickets = []
    for document in (LONG, SHORT):
        prompt, _, tokens = target.arrive(document)
        tickets.append(HoldTicket(target.spec, lambda: ANONYMOUS, prompt=prompt, tokens=tokens))
    long_held = asyncio.create_task(target.take(tickets[0]))
    await asyncio.sleep(0)
    short_held = asyncio.create_task(target.take(tickets[1]))
    await asyncio.sleep(0)
    target.give_back(piece)  # the slice frees: the short prompt behind takes it
    await asyncio.sleep(0)
    assert short_held.done() and short_held.result().label == "slice"
    assert not long_held.done()
    target.give_back(whole)
    await asyncio.sleep(0)
    assert long_held.done() and long_held.result().label == "whole"


def test_with_prefix_balancing_the_prefix_router_chooses_among_those_that_fit() -> None:
    target = _target(H100, SLICE, balancing="prefix")
    assert all(_take(target, LONG).label == "whole" for _ in range(4))
    labels = {_take(target, {"model": "m", "prompt": f"short {i}"}).label for i in range(20)}
    assert labels == {"whole", "slice"}


def test_the_word_withdrawn_the_target_balances_by_load() -> None:
    registry = Registry(clock=lambda: 0.0)
    registry.set_shapes(WORD)
    registry.apply({"ns/m": Discovered(TargetSpec(name="ns/m"), (H100, SLICE))})
    target = registry.targets["ns/m"]
    assert target.shapes is not None
    registry.set_shapes({})
    assert target.shapes is None
    assert target.arrive(LONG)[2] == 0  # no prompt length is estimated for it
