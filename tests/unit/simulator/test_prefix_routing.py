"""Prefix routing in the simulator: the chat trace, the balancer hook, the comparison.

Covers: the synthetic chat trace is seeded and each turn's blocks extend the
previous turn's; a world given the least-loaded balancer explicitly runs
exactly as one given none (so an unset balancer changes nothing); on a small
multi-turn trace over four replicas prefix routing beats least-loaded's hit
rate, reaches 0.8x of one cache with the fleet's KV capacity, and keeps the
load spread within the bound; N activators lose some affinity but stay above least-loaded.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from activator.balancing.prefix_affinity import AffinityConfig
from simulator.baselines import AlwaysOn
from simulator.chat_trace import ChatSpec, generate_chat
from simulator.engine import LlmParams
from simulator.prefix_routing import LeastLoaded, RoutingRow, compare
from simulator.runner import SimulationOptions
from simulator.world import WorldConfig, run_world

SPEC = ChatSpec(duration_s=120.0, conversations_per_s=12.0, seed=3)
ENGINE = LlmParams(prefix_block_tokens=SPEC.block_tokens)


def test_the_chat_trace_is_seeded_and_turns_extend_each_other() -> None:
    trace = generate_chat(SPEC)
    assert trace == generate_chat(SPEC)
    assert trace != generate_chat(replace(SPEC, seed=4))
    by_conversation: dict[int, list[tuple[int | str, ...]]] = {}
    for r in trace:
        assert len(r.prefix) == r.prompt_tokens // SPEC.block_tokens
        own = [b for b in r.prefix if isinstance(b, int) and b >= 0]
        if own:
            by_conversation.setdefault(int(own[0]) // 100_000, []).append(r.prefix)
    multi = [turns for turns in by_conversation.values() if len(turns) > 1]
    assert len(multi) > 100
    for turns in multi:
        for earlier, later in itertools.pairwise(turns):
            assert later[: len(earlier)] == earlier


def test_an_explicit_least_loaded_balancer_runs_as_none() -> None:
    trace = generate_chat(replace(SPEC, duration_s=40.0))
    plain = run_world(trace, AlwaysOn(3), WorldConfig(engine=ENGINE))
    hooked = run_world(trace, AlwaysOn(3), WorldConfig(engine=ENGINE, balancer=LeastLoaded))
    assert hooked.first_token_s == plain.first_token_s
    assert hooked.replicas == plain.replicas


@pytest.fixture(scope="module")
def comparison() -> tuple[float, dict[tuple[str, int], RoutingRow]]:
    options = SimulationOptions(
        max_replicas=6, world=replace(SimulationOptions().world, engine=ENGINE)
    )
    config = AffinityConfig(anchor_blocks=SPEC.system_tokens // SPEC.block_tokens + 1)
    trace = generate_chat(SPEC)
    result = compare(trace, options, activators=(1, 4), config=config, fleet=4)
    return result.finite, {(r.routing, r.activators): r for r in result.rows}


def test_prefix_routing_beats_least_loaded_within_the_bound(
    comparison: tuple[float, dict[tuple[str, int], RoutingRow]],
) -> None:
    ideal, rows = comparison
    least, prefix = rows[("least-loaded", 1)], rows[("prefix", 1)]
    assert least.hit_rate < prefix.hit_rate <= ideal
    assert prefix.hit_rate >= 0.8 * ideal
    assert prefix.load_spread <= 1.25


def test_several_activators_keep_most_of_the_affinity(
    comparison: tuple[float, dict[tuple[str, int], RoutingRow]],
) -> None:
    _, rows = comparison
    one, four = rows[("prefix", 1)], rows[("prefix", 4)]
    least = rows[("least-loaded", 1)]
    assert least.hit_rate < four.hit_rate <= one.hit_rate
