"""The run's options from the flags: :func:`options_from`, a ``SimulationOptions``.

It reads what only the command knows (``--annotation`` pairs, short keys
being Tidal's scaling annotations; a preemption-times file; the fixed-fleet
cache's folder) and checks what the options cannot (``--context-length``,
``--jobs``): each bad value is an error naming the flag and what it allows.
:class:`~simulator.runner.SimulationOptions` checks the rest itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from groundwork.rules.scaling_keys import AUTOSCALING_PREFIX
from scaler.policy import PlacementConfig
from simulator import traces
from simulator.cli.workload import block_tokens
from simulator.engine import LlmParams
from simulator.fleet_cache import FleetCache, default_cache_dir
from simulator.runner import SimulationOptions
from simulator.scorecard import Prices
from simulator.warm_tier import PoolConfig
from simulator.world import ColdStart, SpotModel, WorldConfig

__all__ = ["fleet_cache", "options_from"]


def fleet_cache(args: argparse.Namespace) -> FleetCache:
    """The fixed-fleet cache the flags ask for (memory only with ``--no-fleet-cache``)."""
    if args.no_fleet_cache:
        return FleetCache(None)
    return FleetCache(args.fleet_cache or default_cache_dir())


def _preemption_times(path: Path | None) -> tuple[float, ...]:
    if path is None:
        return ()
    times: list[float] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            times.append(float(text))
        except ValueError as error:
            raise traces.TraceError(
                f"{path}:{number}: expected seconds from the start of the run, got {text!r}"
            ) from error
    return tuple(times)


def _annotations(pairs: list[str]) -> dict[str, str]:
    """``--annotation`` pairs; a short key (no ``/``) is a Tidal autoscaling key."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--annotation wants KEY=VALUE, got {pair!r}")
        if "/" not in key:
            key = AUTOSCALING_PREFIX + key
        elif not key.startswith(AUTOSCALING_PREFIX):
            raise ValueError(
                f"--annotation {pair!r}: the simulator takes Tidal's scaling annotations, "
                f"{AUTOSCALING_PREFIX}KEY=VALUE or the short KEY=VALUE"
            )
        out[key] = value
    return out


def options_from(args: argparse.Namespace) -> SimulationOptions:
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    spot_placement = (
        None
        if args.placement == "on-demand"
        else PlacementConfig(policy=args.placement, on_demand_baseline=args.on_demand_baseline)
    )
    if args.context_length < 1:
        raise ValueError(f"--context-length must be >= 1 token, got {args.context_length}")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    world = WorldConfig(
        engine=LlmParams(max_model_len=args.context_length, prefix_block_tokens=block_tokens(args)),
        cold_start=ColdStart(args.cold_start[0], args.cold_start_sigma),
        spot=SpotModel(
            rate_per_hour=args.spot_preemptions_per_hour,
            notice_s=args.spot_notice,
            times_s=_preemption_times(args.preemption_trace),
            availability=args.spot_availability,
            changes_per_day=args.spot_changes_per_day,
            zones=args.spot_zones,
        ),
        seed=args.seed,
        stepper=args.stepper,
    )
    return SimulationOptions(
        slo_ttft_s=args.slo_ttft,
        target_concurrency=args.target_concurrency,
        max_replicas=args.max_replicas,
        prices=Prices(args.price_on_demand, args.spot_price_ratio),
        world=world,
        tidal_annotations=_annotations(args.annotation),
        policies=policies,
        spot_placement=spot_placement,
        start=args.start,
        pool=PoolConfig(
            slices=args.gpu_slices,
            host_memory_mib=args.host_memory_mib,
            compaction=args.pool_compaction == "on",
            gpu_memory_mib=args.gpu_memory_mib,
            kv_cache_tokens=args.pool_kv_cache_tokens,
        ),
        warm_annotations={
            "autoscaling.tidal.dev/sleep-after": args.sleep_after,
            "autoscaling.tidal.dev/sleep-level": args.sleep_level,
        },
        fleet_cache=fleet_cache(args),
        jobs=args.jobs,
    )
