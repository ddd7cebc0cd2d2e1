"""The simulated world's flags: what every row shares; the warm tier; spot and prices.

The world group sets what every row shares (cold starts, how autoscalers
start, the TTFT objective, the context length, routing, the concurrency
target, the replica ceiling, which rows run, Tidal's annotations); the warm
tier's group the pool of time-sliced GPUs of ``tidal-pool`` and
``tidal-warm``, its defaults the pool's own (:class:`simulator.warm_tier.PoolConfig`);
spot and prices the ``tidal-spot`` row, interruptions and prices, followed
by the LoRA adapters' group (:mod:`simulator.adapter_cli`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from groundwork.rules.scaling_keys import AUTOSCALING_PREFIX
from simulator import adapter_cli
from simulator.cli.flag_types import duration, durations, positive, routings
from simulator.engine import LlmParams
from simulator.runner import OPTIONAL_POLICIES, POLICY_NAMES, STARTS, WARM_ANNOTATIONS
from simulator.warm_tier import POOL_POLICIES, PoolConfig

__all__ = ["spot_flags", "warm_flags", "world_flags"]


def world_flags(parser: argparse.ArgumentParser) -> None:
    world = parser.add_argument_group("world")
    world.add_argument(
        "--cold-start",
        type=durations,
        default=(60.0,),
        metavar="LIST",
        help="median cold start, or a comma list of them (60s,20s,5s,2s) for one table "
        "across them with a cold-start column (default 60s)",
    )
    world.add_argument(
        "--start",
        choices=STARTS,
        default="warm",
        help="how every autoscaler starts: warm, with the replicas the first minute of the "
        "trace needs; zero, with none (fixed fleets are always warm; default warm)",
    )
    world.add_argument(
        "--cold-start-sigma",
        type=float,
        default=0.0,
        metavar="SIGMA",
        help="log-normal spread of cold starts (default 0: fixed; 0.45: p90 1.8x the median)",
    )
    world.add_argument(
        "--slo-ttft",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="TTFT threshold (default 2s)",
    )
    world.add_argument(
        "--context-length",
        type=int,
        default=LlmParams().max_model_len,
        metavar="TOKENS",
        help="the model's context length: a longer prompt is refused with a 400, as vLLM does, "
        "and counts as failed (default %(default)s, Llama-3.1-8B's)",
    )
    world.add_argument(
        "--routing",
        type=routings,
        default=None,
        help="how requests are balanced over a model's replicas: least-loaded (the "
        "activator's) or prefix (routing.tidal.dev/balancing: prefix, the activator's "
        "router); a comma list runs every policy under each. Adds a routing column and the "
        "prefix-cache hit rate (needs prompt block ids: --prefix-field or synthetic:chat). "
        "Default: least-loaded, without the columns",
    )
    world.add_argument(
        "--target-concurrency",
        type=positive,
        default=16.0,
        metavar="N",
        help="requests in flight per replica the baselines and Tidal aim at (default 16)",
    )
    world.add_argument(
        "--max-replicas",
        type=int,
        default=10,
        metavar="N",
        help="most replicas of a model, for every policy (default 10)",
    )
    world.add_argument(
        "--policies",
        default=",".join(POLICY_NAMES),
        metavar="LIST",
        help=f"comma list from {', '.join(POLICY_NAMES + OPTIONAL_POLICIES + POOL_POLICIES)} "
        "or always-on-N (the fixed fleet of N); tidal-concurrency is the scaler's "
        "concurrency-based defaults, without the objective (default: "
        f"{','.join(POLICY_NAMES)})",
    )
    world.add_argument(
        "--annotation",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Tidal annotation for the tidal policies (repeatable), as on a Deployment: "
        f"{AUTOSCALING_PREFIX}KEY=VALUE or the short KEY=VALUE (default: none)",
    )


_POOL = PoolConfig()  # the pool's defaults, which the flags offer


def warm_flags(parser: argparse.ArgumentParser) -> None:
    warm = parser.add_argument_group("the warm tier (policies tidal-pool, tidal-warm)")
    warm.add_argument(
        "--sleep-after",
        default=WARM_ANNOTATIONS["autoscaling.tidal.dev/sleep-after"],
        metavar="DURATION",
        help="tidal-warm's sleep-after annotation (default %(default)s)",
    )
    warm.add_argument(
        "--sleep-level",
        choices=("1", "2"),
        default="1",
        help="tidal-warm's sleep-level annotation (default 1)",
    )
    warm.add_argument(
        "--gpu-slices",
        type=int,
        default=_POOL.slices,
        metavar="N",
        help="time-sliced replicas per GPU, the device plugin's (default %(default)s)",
    )
    warm.add_argument(
        "--host-memory-mib",
        type=int,
        default=_POOL.host_memory_mib,
        metavar="MIB",
        help="host memory of each GPU's node, which holds level-1 sleepers' weights "
        "(default %(default)s: 256 GiB, a p5.48xlarge's per H100)",
    )
    warm.add_argument(
        "--pool-compaction",
        choices=("on", "off"),
        default="on",
        help="give back the emptiest GPU whose pods all fit elsewhere once the pool stops "
        "growing (off: only GPUs of sleepers alone are emptied; default %(default)s)",
    )
    warm.add_argument(
        "--gpu-memory-mib",
        type=int,
        default=81_920,
        metavar="MIB",
        help="memory per GPU (default 81920: an H100 80GB)",
    )
    warm.add_argument(
        "--pool-kv-cache-tokens",
        type=int,
        default=100_000,
        metavar="TOKENS",
        help="KV cache of each model's pod, which sets how many fit awake (default 100000: two)",
    )


def spot_flags(parser: argparse.ArgumentParser) -> None:
    spot = parser.add_argument_group("spot and prices")
    spot.add_argument(
        "--placement",
        choices=("on-demand", "spot", "spot-with-on-demand-baseline"),
        default="on-demand",
        help="add a 'tidal-spot' policy with this placement (Tidal's SpotHedge split; "
        "default on-demand: none added)",
    )
    spot.add_argument(
        "--on-demand-baseline",
        type=int,
        default=1,
        metavar="N",
        help="tidal-spot's on-demand baseline annotation (default 1)",
    )
    spot.add_argument(
        "--spot-preemptions-per-hour",
        type=float,
        default=0.0,
        metavar="RATE",
        help="Poisson rate of interruptions per spot replica-hour (default 0)",
    )
    spot.add_argument(
        "--spot-notice",
        type=duration,
        default=120.0,
        metavar="DURATION",
        help="interruption notice (default 2m, AWS's; GCP: 30s)",
    )
    spot.add_argument(
        "--spot-availability",
        type=float,
        default=1.0,
        metavar="SHARE",
        help="long-run share of time each zone has spot capacity (default 1; SkyPilot traces: "
        "0.17-0.79)",
    )
    spot.add_argument(
        "--spot-changes-per-day",
        type=float,
        default=5.5,
        metavar="N",
        help="spot availability state changes a day per zone (default 5.5, as in SkyPilot's "
        "traces)",
    )
    spot.add_argument(
        "--spot-zones",
        type=int,
        default=1,
        metavar="N",
        help="zones whose spot capacity comes and goes independently; spot replicas spread "
        "over the available ones, as SkyServe does (default 1)",
    )
    spot.add_argument(
        "--preemption-trace",
        type=Path,
        default=None,
        metavar="FILE",
        help="file of preemption times in seconds, one per line (default: none)",
    )
    spot.add_argument(
        "--price-on-demand",
        type=float,
        default=4.0,
        metavar="DOLLARS",
        help="on-demand price per GPU-hour (default 4.0)",
    )
    spot.add_argument(
        "--spot-price-ratio",
        type=float,
        default=0.35,
        metavar="RATIO",
        help="spot price as a share of on-demand (default 0.35)",
    )

    adapter_cli.configure(parser, duration)
