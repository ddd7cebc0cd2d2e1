"""Every row once per variant: each ``--cold-start`` value, and within it each ``--routing``.

Cold starts are outermost. With a routing, every row runs under that
balancer (the activator's, from :mod:`simulator.prefix_routing`) and carries
its name and the prefix-cache hit rate when the trace has prompt block ids
(the oracle's: one infinitely large replica's); ``--routing prefix`` on a
trace without block ids is an error naming the flags that give them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace

from activator.balancing.prefix_affinity import AffinityConfig
from simulator import prefix_workloads, traces
from simulator.chat_trace import ChatSpec
from simulator.cli.workload import CHAT_TRACE, block_tokens
from simulator.oracle import cacheable_tokens
from simulator.prefix_routing import balancer
from simulator.runner import PolicyRun, SimulationOptions, run_policies
from simulator.scorecard import prefix_hit_rate

__all__ = ["affinity_config", "routed_policies", "variant_policies"]


def affinity_config(args: argparse.Namespace) -> AffinityConfig:
    """The prefix router's settings: the activator's, anchored as it anchors a chat.

    The activator hashes a chat's system messages and one more block onto the
    ring; the synthetic chat trace's system prompt is known, so its anchor is
    the same. A file's block ids say nothing of where a conversation starts:
    the router's default depth.
    """
    if args.trace == CHAT_TRACE:
        return AffinityConfig(anchor_blocks=ChatSpec().system_tokens // block_tokens(args) + 1)
    return AffinityConfig()


def routed_policies(
    requests: Sequence[traces.TraceRequest], options: SimulationOptions, args: argparse.Namespace
) -> list[PolicyRun]:
    """Every policy, once per ``--routing`` (once, as always, without it).

    Each routing's runs carry its name and the prefix-cache hit rate when the
    trace has prompt block ids; the oracle's is one infinitely large
    replica's (every block seen before is cached).
    """
    if args.routing is None:
        return run_policies(requests, options)
    with_blocks = any(r.prefix for r in requests)
    if "prefix" in args.routing and not with_blocks:
        raise ValueError(
            f"--routing prefix needs prompt block ids, and {args.trace} has none: give "
            "--prefix-field FIELD (each request's prompt as block hashes) or --trace "
            f"{CHAT_TRACE}"
        )
    block = options.world.engine.prefix_block_tokens
    ideal = (
        sum(cacheable_tokens(requests, block)) / max(1, sum(r.prompt_tokens for r in requests))
        if with_blocks
        else None
    )
    config = affinity_config(args)
    out: list[PolicyRun] = []
    for routing in args.routing:
        anchors = (
            prefix_workloads.anchor_of
            if args.trace.removeprefix("synthetic:") in prefix_workloads.WORKLOADS
            else None
        )
        make = balancer(routing, 1, config, engine=options.world.engine, anchor_of=anchors)
        world = replace(options.world, balancer=make)
        for run in run_policies(requests, replace(options, world=world)):
            if not with_blocks:
                hit = None
            elif run.result is None:
                hit = ideal
            else:
                hit = prefix_hit_rate(run.result)
            card = replace(run.scorecard, routing=routing, prefix_hit_rate=hit)
            out.append(replace(run, scorecard=card))
    return out


def variant_policies(
    requests: Sequence[traces.TraceRequest], options: SimulationOptions, args: argparse.Namespace
) -> list[PolicyRun]:
    """Every policy once per ``--cold-start`` value and ``--routing`` (cold starts outermost).

    With more than one cold start each row carries the one it ran with.
    """
    colds: tuple[float, ...] = args.cold_start
    out: list[PolicyRun] = []
    for cold in colds:
        world = replace(options.world, cold_start=replace(options.world.cold_start, median_s=cold))
        for run in routed_policies(requests, replace(options, world=world), args):
            if len(colds) > 1:
                run = replace(run, scorecard=replace(run.scorecard, cold_start_s=cold))
            out.append(run)
    return out
