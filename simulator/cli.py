"""``tidal simulate``: replay a trace through Tidal and the baselines, print the scorecard.

Reads a trace (a file, ``code`` or ``conv`` for the Azure 2023 traces
shipped with the package, or ``synthetic:KIND``), runs every policy of
:mod:`simulator.runner` over it in simulated time, and prints a table, or
with ``--json`` one line of JSON (the last line on stdout)::

    {"policies": [{"name": ..., "slo_attainment": ..., "gpu_seconds": ...,
                   "cost": ..., "cold_starts": ..., "failed": ..., ...}, ...]}

``--seeds N`` runs seeds ``--seed`` to ``--seed + N - 1`` (the world's
randomness, thinning, synthetic workloads) and reports each column's mean,
with its spread (min and max over the seeds) under ``"spread"`` in JSON and
in a second table. A trace whose span or rate suggests the wrong time unit
draws a warning on stderr naming the flag to set.

``--charts DIR`` writes PNG charts (matplotlib, from the ``loadtest`` extra,
imported only then). Durations are Go-style (``60s``, ``2m``), as in the
annotations.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Protocol

from activator.balancing.prefix_affinity import AffinityConfig
from groundwork.rules.durations import parse_duration_s
from groundwork.rules.scaling_keys import AUTOSCALING_PREFIX
from scaler.policy import InvalidAnnotation, PlacementConfig
from simulator import adapter_cli, prefix_workloads, progress, shape_cli, synthetic, traces
from simulator.chat_trace import MEAN_TURNS, ChatSpec, generate_chat
from simulator.classes import class_table, ttft_by_class
from simulator.engine import LlmParams
from simulator.fleet_cache import CACHE_DIR_ENV, FleetCache, default_cache_dir
from simulator.frontier import FleetPoint
from simulator.oracle import cacheable_tokens
from simulator.prefix_routing import ROUTINGS, balancer
from simulator.runner import (
    OPTIONAL_POLICIES,
    POLICY_NAMES,
    STARTS,
    WARM_ANNOTATIONS,
    PolicyRun,
    SimulationOptions,
    run_policies,
    task_count,
)
from simulator.scorecard import Prices, Scorecard, prefix_hit_rate
from simulator.trace_stream import StreamedTrace, scaled, windowed
from simulator.verdict import Point, Verdict, row_verdicts
from simulator.warm_tier import POOL_POLICIES, PoolConfig
from simulator.world import STEPPERS, ColdStart, SpotModel, WorldConfig

__all__ = ["configure", "load_requests", "run"]


def _duration(text: str) -> float:
    try:
        return parse_duration_s(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from error
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _durations(text: str) -> tuple[float, ...]:
    values = tuple(_duration(part.strip()) for part in text.split(","))
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r}: each duration once")
    return values


def _routings(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    unknown = [name for name in names if name not in ROUTINGS]
    if unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"{text!r}: choose from {', '.join(ROUTINGS)}, or both as a comma list, each once"
        )
    return names


# The synthetic chat trace's blocks are vLLM's 16 tokens, a file's (Mooncake's) 512.
_CHAT_TRACE = "synthetic:chat"
_CHAT_BLOCK_TOKENS = 16
_FILE_BLOCK_TOKENS = 512


class _Group(Protocol):
    """What a flag group is to the functions that fill it (argparse's own group type
    is private)."""

    def add_argument(self, *names: str, **options: Any) -> argparse.Action: ...


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replay a request trace in simulated time through Tidal's own policy and the "
        "baselines (always-on, Kubernetes HPA, KEDA + HTTP add-on, Knative KPA, NVIDIA "
        "Dynamo's SLA planner) and the oracle (a lower bound on the GPU-hours any schedule "
        "needs for its SLO), and print the scorecard: SLO "
        "attainment, goodput, cold starts, failures, GPU-seconds and cost. Durations are "
        "Go-style (90s, 5m, 1h)."
    )
    _workload_flags(parser)
    _world_flags(parser)
    _warm_flags(parser)
    _spot_flags(parser)
    _output_flags(parser)
    shape_cli.configure(parser)
    speed_flags(parser)


def _workload_flags(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("workload")
    src.add_argument(
        "--trace",
        default=None,
        help="required unless --adapters: a CSV or JSONL file; code or conv, the Azure LLM "
        "inference traces 2023 shipped with Tidal (CC-BY-4.0; or any file in "
        "$TIDAL_TRACES_DIR); or synthetic:KIND with KIND one of "
        f"{', '.join((*synthetic.KINDS, 'chat', *prefix_workloads.WORKLOADS))} (chat, "
        "documents, agents, few-shot: prompts with block ids that share prefixes, for "
        "--routing; documents and few-shot: --synthetic-rate requests/min, agents: tasks/min)",
    )
    _field_flags(parser.add_argument_group("trace fields"))
    _window_flags(parser.add_argument_group("what is replayed"))


def _field_flags(src: _Group) -> None:
    """Which fields of a trace file hold what."""
    src.add_argument(
        "--time-field",
        default="TIMESTAMP",
        metavar="FIELD",
        help="timestamp field (default %(default)s)",
    )
    src.add_argument(
        "--prompt-field",
        default="ContextTokens",
        metavar="FIELD",
        help="prompt-token field (default %(default)s)",
    )
    src.add_argument(
        "--output-field",
        default="GeneratedTokens",
        metavar="FIELD",
        help="output-token field (default %(default)s)",
    )
    src.add_argument(
        "--model-field", default=None, metavar="FIELD", help="model field (default: one model)"
    )
    src.add_argument(
        "--prefix-field",
        default=None,
        metavar="FIELD",
        help="field holding the prompt as a list of block hashes (as Mooncake's hash_ids): "
        "replicas then serve shared prefixes from an LRU prefix cache (default: none)",
    )
    src.add_argument(
        "--class-field",
        default=None,
        metavar="FIELD",
        help="field holding each request's priority class (critical, standard, sheddable or "
        "a whole number, higher first): held requests are released by class, and TTFT is "
        "reported per class (default: none, every request standard)",
    )
    src.add_argument(
        "--tenant-field",
        default=None,
        metavar="FIELD",
        help="field naming each request's tenant: within a class, held requests are released "
        "in turns across tenants weighted by tokens (default: none, one tenant)",
    )
    src.add_argument(
        "--prefix-block-tokens",
        type=int,
        default=None,
        metavar="TOKENS",
        help="tokens per block hash in --prefix-field (default 512, the Mooncake traces'; "
        "synthetic:chat: 16, vLLM's block)",
    )


def _window_flags(src: _Group) -> None:
    """How the trace is read and which part of it is replayed, and the synthetic ones."""
    src.add_argument(
        "--time-unit", choices=("s", "ms"), default="s", help="numeric timestamp unit (default s)"
    )
    src.add_argument(
        "--timestamps",
        choices=("auto", "absolute", "relative"),
        default="auto",
        help="absolute times are re-based to the first request; relative ones kept (default auto)",
    )
    src.add_argument(
        "--format",
        choices=("auto", "csv", "jsonl"),
        default="auto",
        help="the trace file's format (default auto: by its extension)",
    )
    src.add_argument(
        "--skip",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="skip this much of the trace's beginning (default 0s)",
    )
    src.add_argument(
        "--duration",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="replay only this much (default: all of it)",
    )
    src.add_argument(
        "--load-factor",
        type=_positive,
        default=1.0,
        metavar="F",
        help="scale the load: each request is sent int(F) times (spread within its second) "
        "and once more with probability F - int(F), so 0.5 keeps half the requests (seeded; "
        "default 1)",
    )
    src.add_argument(
        "--synthetic-duration",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="length of a synthetic:KIND trace (default 1h; diurnal: 24h, week: 7 days of "
        "--day-length)",
    )
    src.add_argument(
        "--synthetic-rate",
        type=_positive,
        default=None,
        metavar="PER-MIN",
        help="mean requests/min of a synthetic:KIND trace (default 154; diurnal and week: "
        f"{synthetic.PRODUCTION_DAY_PER_MIN:,.0f}, the Azure LLM trace 2024's code service; "
        f"synthetic:chat: conversations start at this over their mean {MEAN_TURNS:.1f} turns)",
    )
    src.add_argument(
        "--day-length",
        type=_duration,
        default=synthetic.DAY_S,
        metavar="DURATION",
        help="the day of synthetic:diurnal and synthetic:week (default 24h, a real day; 20m "
        "compresses it, for a quick look)",
    )
    src.add_argument(
        "--synthetic-models",
        type=int,
        default=100,
        metavar="N",
        help="models in a synthetic:KIND trace (default 100)",
    )
    src.add_argument(
        "--seed", type=int, default=1, metavar="N", help="random seed of the run (default 1)"
    )
    src.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="N",
        help="run this many seeds from --seed and report each column's mean and spread (default 1)",
    )


def _world_flags(parser: argparse.ArgumentParser) -> None:
    world = parser.add_argument_group("world")
    world.add_argument(
        "--cold-start",
        type=_durations,
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
        type=_duration,
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
        type=_routings,
        default=None,
        help="how requests are balanced over a model's replicas: least-loaded (the "
        "activator's) or prefix (routing.tidal.dev/balancing: prefix, the activator's "
        "router); a comma list runs every policy under each. Adds a routing column and the "
        "prefix-cache hit rate (needs prompt block ids: --prefix-field or synthetic:chat). "
        "Default: least-loaded, without the columns",
    )
    world.add_argument(
        "--target-concurrency",
        type=_positive,
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


def _warm_flags(parser: argparse.ArgumentParser) -> None:
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


def _spot_flags(parser: argparse.ArgumentParser) -> None:
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
        type=_duration,
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

    adapter_cli.configure(parser, _duration)


def _output_flags(parser: argparse.ArgumentParser) -> None:
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON line, last on stdout")
    out.add_argument(
        "--charts", type=Path, default=None, metavar="DIR", help="write PNG charts to this folder"
    )
    out.add_argument(
        "--chart-policy",
        default=None,
        metavar="POLICY",
        help="policy for the replicas-vs-load chart (default tidal; needs --charts)",
    )


def speed_flags(parser: argparse.ArgumentParser) -> None:
    """How the run uses the machine: processes, the fixed-fleet cache, the progress bar."""
    speed = parser.add_argument_group("speed")
    speed.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run the rows side by side in N processes (default 1); the answers are the same",
    )
    speed.add_argument(
        "--stepper",
        choices=STEPPERS,
        default="jump",
        help="how replicas' engines are simulated: jump from one batch change to the next, or "
        "step, every engine step (the reference the jumps are checked against; slower, same "
        "scorecard; default jump)",
    )
    speed.add_argument(
        "--fleet-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep fixed fleets' runs in this folder and reuse them across rows and runs "
        f"(default ${CACHE_DIR_ENV}, else ~/.cache/tidal/fleets; {CACHE_DIR_ENV}=off: none)",
    )
    speed.add_argument(
        "--no-fleet-cache",
        action="store_true",
        help="run every fixed fleet, reusing nothing from earlier runs",
    )
    speed.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr for runs over a few seconds (default: when stderr is "
        "a terminal)",
    )


def fleet_cache(args: argparse.Namespace) -> FleetCache:
    """The fixed-fleet cache the flags ask for (memory only with ``--no-fleet-cache``)."""
    if args.no_fleet_cache:
        return FleetCache(None)
    return FleetCache(args.fleet_cache or default_cache_dir())


def synthetic_shape(args: argparse.Namespace) -> tuple[float, float]:
    """A synthetic trace's length and mean rate (per minute): the flags', else its kind's."""
    kind = args.trace.removeprefix("synthetic:")
    duration = args.synthetic_duration
    if duration is None:
        days = synthetic.DEFAULT_DURATION_S.get(kind, 3600.0) / synthetic.DAY_S
        duration = days * args.day_length if kind in ("diurnal", "week") else 3600.0
    rate = args.synthetic_rate
    if rate is None:
        rate = synthetic.PRODUCTION_DAY_PER_MIN if kind in ("diurnal", "week") else 154.0
    return float(duration), float(rate)


def load_requests(args: argparse.Namespace, *, warn: bool = True) -> Sequence[traces.TraceRequest]:
    """The workload the flags describe (a file, a named trace, or a synthetic one).

    A file in time order and the synthetic kinds that draw in time order are
    read as streams (:class:`~simulator.trace_stream.StreamedTrace`: each
    row reads them afresh, so their length costs no memory); the others are
    lists. ``warn``: print to stderr what reading the trace noticed (skipped
    rows, a doubtful time unit).
    """
    name: str = args.trace
    source = _source(args, warn=warn)
    whole = not (args.skip or args.duration is not None or args.load_factor != 1)
    if isinstance(source, StreamedTrace) and whole:
        records: Sequence[traces.TraceRequest] = source
    elif isinstance(source, StreamedTrace) or callable(source):
        opener = source.__iter__ if isinstance(source, StreamedTrace) else source
        records = StreamedTrace(
            lambda: scaled(
                windowed(opener(), start_s=args.skip, duration_s=args.duration),
                args.load_factor,
                seed=args.seed,
            )
        )
    else:
        records = traces.window(source, start_s=args.skip, duration_s=args.duration)
        records = scale_load(records, args.load_factor, seed=args.seed)
    if not records:
        raise traces.TraceError(f"{name}: no request in the window the flags select")
    return records


def _source(
    args: argparse.Namespace, *, warn: bool
) -> Sequence[traces.TraceRequest] | Callable[[], Iterator[traces.TraceRequest]]:
    """The whole trace the flags name, before the window and the load factor: a list, a
    file read as a stream, or how to draw a synthetic one (read only through the window)."""
    name: str = args.trace
    synthetic_s, synthetic_rate = synthetic_shape(args)
    kind = name.removeprefix("synthetic:")
    if name == _CHAT_TRACE:
        return generate_chat(
            ChatSpec(
                duration_s=synthetic_s,
                conversations_per_s=synthetic_rate / 60.0 / MEAN_TURNS,
                block_tokens=block_tokens(args),
                seed=args.seed,
            )
        )
    if kind in prefix_workloads.WORKLOADS:
        return prefix_workloads.generate_workload(
            prefix_workloads.WorkloadSpec(
                kind=kind,
                duration_s=synthetic_s,
                rate_per_s=synthetic_rate / 60.0,
                block_tokens=block_tokens(args),
                seed=args.seed,
            )
        )
    if name.startswith("synthetic:"):
        spec = synthetic.SyntheticSpec(
            kind=kind,
            duration_s=synthetic_s,
            requests_per_min=synthetic_rate,
            models=args.synthetic_models,
            seed=args.seed,
            day_s=args.day_length,
        )
        if kind == "many-models":
            return synthetic.generate(spec)  # drawn model by model: made whole
        return lambda: synthetic.stream(spec)
    fmt = traces.TraceFormat(
        time_field=args.time_field,
        prompt_field=args.prompt_field,
        output_field=args.output_field,
        model_field=args.model_field,
        prefix_field=args.prefix_field,
        class_field=args.class_field,
        tenant_field=args.tenant_field,
        time_unit=args.time_unit,
        timestamps=args.timestamps,
        kind=args.format,
    )
    path = traces.find_trace(name)
    notes: list[str] = []
    # Only the first reading notes what it skipped.
    first = iter([notes])
    records: Sequence[traces.TraceRequest]
    try:
        records = StreamedTrace(lambda: traces.stream_trace(path, fmt, notes=next(first, None)))
    except traces.UnsortedTraceError:
        notes = []
        records = traces.read_trace(path, fmt, notes=notes)
    for warning in [*notes, *traces.unit_warnings(records, fmt)] if warn else []:
        print(f"tidal simulate: warning: {name}: {warning}", file=sys.stderr)
    return records


def scale_load(
    records: Sequence[traces.TraceRequest], factor: float, *, seed: int
) -> list[traces.TraceRequest]:
    """Each request ``int(factor)`` times, and once more with probability ``factor - int(factor)``.

    Copies are spread evenly within the second after the original, so a
    burst stays a burst but is not k requests at one instant. A fraction
    thins the trace with a seeded draw per request.
    """
    if not factor > 0:
        raise traces.TraceError(f"--load-factor must be > 0, got {factor}")
    if factor == 1:
        return list(records)
    whole, part = int(factor), factor - int(factor)
    rng = random.Random(seed)
    out: list[traces.TraceRequest] = []
    for r in records:
        copies = whole + (1 if part > 0 and rng.random() < part else 0)
        out.extend(replace(r, offset_s=r.offset_s + j / copies) for j in range(copies))
    out.sort(key=lambda r: r.offset_s)
    return out


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


def block_tokens(args: argparse.Namespace) -> int:
    """Tokens per prompt block: ``--prefix-block-tokens``, else the trace's own size."""
    if args.prefix_block_tokens is not None:
        if args.prefix_block_tokens < 1:
            raise ValueError(f"--prefix-block-tokens must be >= 1, got {args.prefix_block_tokens}")
        return int(args.prefix_block_tokens)
    synthetic_blocks = args.trace == _CHAT_TRACE or (
        args.trace.removeprefix("synthetic:") in prefix_workloads.WORKLOADS
    )
    return _CHAT_BLOCK_TOKENS if synthetic_blocks else _FILE_BLOCK_TOKENS


def affinity_config(args: argparse.Namespace) -> AffinityConfig:
    """The prefix router's settings: the activator's, anchored as it anchors a chat.

    The activator hashes a chat's system messages and one more block onto the
    ring; the synthetic chat trace's system prompt is known, so its anchor is
    the same. A file's block ids say nothing of where a conversation starts:
    the router's default depth.
    """
    if args.trace == _CHAT_TRACE:
        return AffinityConfig(anchor_blocks=ChatSpec().system_tokens // block_tokens(args) + 1)
    return AffinityConfig()


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


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(cards: list[Scorecard], verdicts: Sequence[Verdict | None] = ()) -> str:
    """The scorecard as a fixed-width text table.

    Cards run with ``--routing`` add a routing column and the prefix-cache
    hit rate beside TTFT; without it the table is as it always was. With
    ``verdicts`` (one per card, from the fixed-fleet frontier), a last
    column says where each autoscaler row stands against it.
    """
    judged = len(verdicts) == len(cards) and any(v is not None for v in verdicts)
    routed = any(c.routing is not None for c in cards)
    timed = any(c.cold_start_s is not None for c in cards)
    extra = f"{'routing':<12} {'hit':>5} " if routed else ""
    cold = f"{'cold start':>10} " if timed else ""
    header = (
        f"{'policy':<18} {cold}{'SLO':>6} {'goodput':>8} {extra}{'TTFT p50':>8} {'p99':>7} "
        f"{'cold':>5} {'wait p50':>8} {'p99':>6} {'failed':>6} {'GPU-h':>6} "
        f"{'busy':>6} {'idle':>6} {'serve':>6} {'start':>6} {'sleep':>6} {'spot':>6} "
        f"{'cost':>7} {'wakes':>5}" + (" frontier" if judged else "")
    )
    lines = [header, "-" * len(header)]
    for index, c in enumerate(cards):
        # A fleet or bound that misses the attainment goal carries a mark.
        name = f"{c.name}*" if c.reaches_target is False else c.name
        extra = f"{c.routing or '-':<12} {_fmt(c.prefix_hit_rate, 3):>5} " if routed else ""
        cold = f"{_fmt(c.cold_start_s, 0) + 's':>10} " if timed else ""
        lines.append(
            f"{name:<18} {cold}{c.slo_attainment * 100:>5.1f}% {c.goodput_rps:>8.2f} {extra}"
            f"{_fmt(c.ttft_p50_s):>8} {_fmt(c.ttft_p99_s, 1):>7} {c.cold_starts:>5g} "
            f"{_fmt(c.cold_start_wait_p50_s, 1):>8} {_fmt(c.cold_start_wait_p99_s, 1):>6} "
            f"{c.failed:>6g} {c.gpu_seconds / 3600:>6.2f} {c.gpu_seconds_busy / 3600:>6.2f} "
            f"{c.gpu_seconds_idle / 3600:>6.2f} {c.gpu_seconds_serving / 3600:>6.2f} "
            f"{c.gpu_seconds_starting / 3600:>6.2f} {c.gpu_seconds_sleeping_only / 3600:>6.2f} "
            f"{c.gpu_seconds_spot / 3600:>6.2f} {c.cost:>7.2f} {c.wakes:>5g}"
            + (f" {_verdict_cell(verdicts[index])}" if judged else "")
        )
    c0 = cards[0] if cards else None
    if c0 is not None:
        lines.append(
            f"SLO: TTFT <= {c0.slo_ttft_s:g}s (failed requests miss it); goodput in "
            "requests/s meeting it; cold = zero-to-ready transitions, wait in s; GPU-hours, "
            "each device whole however many pods share it, split into serve (a pod awake "
            "there), start (in a cold start) and sleep (sleepers only: paid for nothing); "
            "reactive: demand known each second, "
            "capacity one cold start late; oracle: a lower bound on GPU-hours at its SLO, "
            "cold = the cold starts the bound charges"
        )
        if judged:
            lines.append(
                "frontier: GPU-h over the smallest fixed fleet reaching the row's SLO (above: "
                "none does), the row's SLO less the best fleet's costing no more, in points; "
                "dominated: a fleet or another row reaches its SLO with 0.95x its GPU-h or less, "
                "or 0.5 point more with no more"
            )
        if routed:
            lines.append(
                "hit: prompt tokens served from the replicas' prefix caches over all they were "
                "sent (vLLM's prefix_cache_hits / prefix_cache_queries); the oracle's is one "
                "infinitely large replica's"
            )
        if any(c.reaches_target is False for c in cards):
            lines.append(
                "* no fleet up to --max-replicas reaches the 99 % goal: shown is the smallest "
                "that meets every request the engine can, else the ceiling"
            )
        lost = [c for c in cards if c.first_cold_start_missed]
        lines.append(
            "first cold start (requests arriving before a row's first replica was ready that "
            "missed the objective): "
            + (
                ", ".join(
                    f"{c.name} {c.first_cold_start_missed:g} "
                    f"({c.first_cold_start_missed / max(1, c.requests) * 100:.1f} %)"
                    for c in lost
                )
                or "none"
            )
        )
    return "\n".join(lines)


def _verdict_cell(verdict: Verdict | None) -> str:
    return "-" if verdict is None else verdict.summary()


def verdicts_for(
    cards: Sequence[Scorecard], per_seed: list[list[PolicyRun]]
) -> list[Verdict | None]:
    """Each card's verdict against the frontier of its variant (cold start, routing)."""
    frontiers = [
        (
            (card.cold_start_s, card.routing),
            [Point(f"fleet {p.replicas}", p.slo_attainment, p.gpu_seconds) for p in points],
        )
        for card, points in _frontiers(per_seed)
    ]
    rows = [(c.name, c.slo_attainment, c.gpu_seconds, (c.cold_start_s, c.routing)) for c in cards]
    return row_verdicts(rows, frontiers)


def mean_card(cards: list[Scorecard]) -> tuple[Scorecard, dict[str, tuple[float, float]]]:
    """One policy over several seeds: each numeric column's mean, and its (min, max)."""
    values: dict[str, Any] = {}
    spread: dict[str, tuple[float, float]] = {}
    for f in fields(Scorecard):
        column = [getattr(c, f.name) for c in cards]
        if f.name in ("name", "routing") and column[0] is not None:
            names = list(dict.fromkeys(column))
            values[f.name] = names[0] if len(names) == 1 else "/".join(names)
        elif f.name == "failed_by_reason":
            reasons = sorted({k for c in column for k in c})
            values[f.name] = {k: statistics.fmean(c.get(k, 0) for c in column) for k in reasons}
        elif f.name == "reaches_target":
            values[f.name] = None if column[0] is None else all(column)
        elif any(v is None for v in column):
            values[f.name] = None
        else:
            values[f.name] = statistics.fmean(column)
            spread[f.name] = (min(column), max(column))
    return Scorecard(**values), spread


def _spread_table(rows: list[tuple[Scorecard, dict[str, tuple[float, float]]]]) -> str:
    def span(spread: dict[str, tuple[float, float]], key: str, scale: float, digits: int) -> str:
        lo, hi = spread.get(key, (0.0, 0.0))
        return f"{lo * scale:.{digits}f}..{hi * scale:.{digits}f}"

    names = [c.name if c.routing is None else f"{c.name} {c.routing}" for c, _ in rows]
    width = max([18, *(len(n) for n in names)])
    header = (
        f"{'policy':<{width}} {'SLO %':>13} {'GPU-h':>13} {'cost':>15} {'cold':>9} {'failed':>11}"
    )
    lines = [header, "-" * len(header)]
    for name, (_, spread) in zip(names, rows, strict=True):
        lines.append(
            f"{name:<{width}} {span(spread, 'slo_attainment', 100, 1):>13} "
            f"{span(spread, 'gpu_seconds', 1 / 3600, 2):>13} {span(spread, 'cost', 1, 2):>15} "
            f"{span(spread, 'cold_starts', 1, 0):>9} {span(spread, 'failed', 1, 0):>11}"
        )
    return "\n".join(lines)


def _check_charts(args: argparse.Namespace) -> None:
    if args.chart_policy is not None and args.charts is None:
        raise ValueError("--chart-policy chooses the replicas chart of --charts DIR; give --charts")
    if args.charts is None:
        return
    try:
        args.charts.mkdir(parents=True, exist_ok=True)
        probe = args.charts / ".tidal-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ValueError(
            f"--charts {args.charts}: cannot write there ({error.strerror or error}); "
            "give a folder you can write to"
        ) from error


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
            f"{_CHAT_TRACE}"
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


def frontier_lines(per_seed: list[list[PolicyRun]]) -> list[str]:
    """The frontier under the table: each fleet's attainment and GPU-hours (seed means)."""
    lines = []
    for card, points in _frontiers(per_seed):
        tags = []
        if card.cold_start_s is not None:
            tags.append(f"cold start {card.cold_start_s:g}s")
        if card.routing is not None:
            tags.append(card.routing)
        label = f" ({', '.join(tags)})" if tags else ""
        cells = [
            f"{p.replicas}: {p.slo_attainment * 100:.1f}% {p.gpu_seconds / 3600:.2f}"
            + ("" if p.simulated else "~")
            for p in points
        ]
        lines.append(f"fixed fleets{label} (replicas: SLO, GPU-h): " + ", ".join(cells))
    if lines:
        lines.append(
            "~ not simulated: above the first fleet that meets every request any schedule "
            "can, or where two sizes in a row added under 0.1 %; carried from it (same "
            "requests met, GPU-h in proportion)"
        )
    return lines


def fleets_json(per_seed: list[list[PolicyRun]]) -> list[dict[str, object]]:
    """The fixed-fleet frontier of every always-on row, each point's mean over the seeds."""
    out: list[dict[str, object]] = []
    for card, points in _frontiers(per_seed):
        for p in points:
            point = p.as_json()
            if card.cold_start_s is not None:
                point["cold_start_s"] = card.cold_start_s
            if card.routing is not None:
                point["routing"] = card.routing
            out.append(point)
    return out


def _frontiers(per_seed: list[list[PolicyRun]]) -> list[tuple[Scorecard, list[FleetPoint]]]:
    """Per always-on row (one per variant): its card and its frontier, averaged over seeds."""
    rows = []
    for index, first in enumerate(per_seed[0]):
        if not first.fleets:
            continue
        series = [runs[index].fleets for runs in per_seed]
        points = [
            FleetPoint(
                replicas=column[0].replicas,
                slo_attainment=statistics.fmean(p.slo_attainment for p in column),
                gpu_seconds=statistics.fmean(p.gpu_seconds for p in column),
                cost=statistics.fmean(p.cost for p in column),
                simulated=all(p.simulated for p in column),
            )
            for column in zip(*series, strict=True)
        ]
        rows.append((first.scorecard, points))
    return rows


def _cpu_s() -> float:
    """CPU seconds of this process and of the workers it has waited for (``--jobs``)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _json_document(
    args: argparse.Namespace,
    rows: Sequence[tuple[Scorecard, dict[str, tuple[float, float]]]],
    verdicts: Sequence[Any],
    per_seed: list[list[PolicyRun]],
    results: Sequence[Any],
    seeds: Sequence[int],
) -> dict[str, object]:
    """``--json``'s document: a row per policy (its frontier verdict, its CPU, its
    spread over seeds), the fixed fleets, and TTFT by class when asked."""
    policies = []
    for index, ((card, spread), verdict) in enumerate(zip(rows, verdicts, strict=True)):
        row = card.as_json()
        if verdict is not None:
            row["frontier"] = verdict.as_json()
        # What the row cost, per seed (the always-on row carries the frontier's).
        row["cpu_s"] = round(statistics.fmean(s[index].cpu_s for s in per_seed), 3)
        if len(seeds) > 1:
            row["spread"] = {k: [round(lo, 4), round(hi, 4)] for k, (lo, hi) in spread.items()}
        policies.append(row)
    document: dict[str, object] = {
        "policies": policies,
        "fleets": fleets_json(per_seed),
        "start": args.start,
        "seeds": list(seeds),
    }
    if args.class_field is not None:
        document["ttft_by_class"] = {
            r.name: {k: v.as_json() for k, v in ttft_by_class(r).items()} for r in results
        }
    return document


def run(args: argparse.Namespace) -> int:
    started = _cpu_s()
    if args.seeds < 1:
        print(f"tidal simulate: --seeds must be >= 1, got {args.seeds}", file=sys.stderr)
        return 2
    if args.adapters:
        try:
            return adapter_cli.run(args)
        except ValueError as error:
            print(f"tidal simulate: {error}", file=sys.stderr)
            return 2
    if args.trace is None:
        print("tidal simulate: --trace is required (or --adapters N)", file=sys.stderr)
        return 2
    if args.shapes:
        try:
            requests = load_requests(args)
            options = options_from(args)
        except (traces.TraceError, traces.TracesMissingError, ValueError) as error:
            print(f"tidal simulate: {error}", file=sys.stderr)
            return 2
        return shape_cli.run(args, requests, options)
    seeds = [args.seed + i for i in range(args.seeds)]
    per_seed: list[list[PolicyRun]] = []
    variants = len(args.routing or [None]) * len(args.cold_start)
    if args.progress if args.progress is not None else sys.stderr.isatty():
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        tasks = task_count(policies, spot=args.placement != "on-demand")
        progress.start(rows=len(seeds) * variants * tasks)
    try:
        _check_charts(args)
        for seed in seeds:
            seeded = argparse.Namespace(**{**vars(args), "seed": seed})
            requests = load_requests(seeded, warn=seed == seeds[0])
            options = options_from(seeded)
            # A bad annotation (--annotation, --sleep-after) says which in a ValueError.
            per_seed.append(variant_policies(requests, options, args))
    except (traces.TraceError, traces.TracesMissingError, InvalidAnnotation, ValueError) as error:
        print(f"tidal simulate: {error}", file=sys.stderr)
        return 2
    finally:
        progress.finish()
    # Charts draw one variant's runs (the first cold start and routing): a
    # second would repeat every name.
    runs = per_seed[0][: len(per_seed[0]) // variants]
    rows: list[tuple[Scorecard, dict[str, tuple[float, float]]]]
    if len(seeds) == 1:
        rows = [(r.scorecard, {}) for r in per_seed[0]]
    else:
        rows = [mean_card([s[i].scorecard for s in per_seed]) for i in range(len(per_seed[0]))]
    cards = [card for card, _ in rows]
    if args.charts is not None:
        from simulator import charts

        try:
            written = charts.write_charts(runs, args.charts, focus=args.chart_policy or "tidal")
        except charts.ChartsUnavailable as error:
            print(f"tidal simulate: {error}", file=sys.stderr)
            return 2
        for path in written:
            print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    elapsed = _cpu_s() - started
    results = [r.result for r in runs if r.result is not None]
    verdicts = verdicts_for(cards, per_seed)
    if args.json:
        document = _json_document(args, rows, verdicts, per_seed, results, seeds)
        print(json.dumps({**document, "cpu_s": round(elapsed, 2)}))
    else:
        colds = ", ".join(f"{c:g}" for c in args.cold_start)
        print(
            f"{len(requests)} requests over {requests[-1].offset_s:.0f} s, cold start "
            f"{colds} s, {args.start} start, target concurrency "
            f"{options.target_concurrency:g} per replica, at most {options.max_replicas}"
            + (f"; mean of seeds {seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else "")
        )
        print(table(cards, verdicts))
        for line in frontier_lines(per_seed):
            print(line)
        if len(seeds) > 1:
            print(f"spread over {len(seeds)} seeds (min..max):")
            print(_spread_table(rows))
        if args.class_field is not None:
            print(f"TTFT by class (seed {seeds[0]}):")
            print(class_table(results))
        print(f"simulated in {elapsed:.1f} s of CPU")
    return 0
