"""``tidal simulate``: replay a trace through Tidal and the baselines, print the scorecard.

Reads a trace (a file, a short name such as ``code`` for the Azure traces in
``../shared/traces/``, or ``synthetic:KIND``), runs every policy of
:mod:`scaler.sim.runner` over it in simulated time, and prints a table, or
with ``--json`` one line of JSON (the last line on stdout)::

    {"policies": [{"name": ..., "slo_attainment": ..., "gpu_seconds": ...,
                   "cost": ..., "cold_starts": ..., "failed": ..., ...}, ...]}

``--charts DIR`` writes PNG charts (matplotlib, from the ``loadtest`` extra,
imported only then). Durations are Go-style (``60s``, ``2m``), as in the
annotations.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from scaler.policy import InvalidAnnotation, PlacementConfig, parse_duration_s
from scaler.sim import synthetic, traces
from scaler.sim.runner import (
    POLICY_NAMES,
    WARM_ANNOTATIONS,
    PolicyRun,
    SimulationOptions,
    run_policies,
)
from scaler.sim.scorecard import Prices, Scorecard
from scaler.sim.warm_tier import POOL_POLICIES, PoolConfig
from scaler.sim.world import ColdStart, SpotModel, WorldConfig

__all__ = ["configure", "load_requests", "run"]


def _duration(text: str) -> float:
    try:
        return parse_duration_s(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration; use Go style such as 90s, 5m, 1h30m"
        ) from error


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from error
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replay a request trace in simulated time through Tidal's own policy and the "
        "baselines (always-on, Kubernetes HPA, KEDA + HTTP add-on, Knative KPA) and print "
        "the scorecard: SLO attainment, goodput, cold starts, failures, GPU-seconds and cost."
    )
    src = parser.add_argument_group("workload")
    src.add_argument(
        "--trace",
        required=True,
        help="a CSV or JSONL file, a name in ../shared/traces/ (code, conv), or "
        f"synthetic:KIND with KIND one of {', '.join(synthetic.KINDS)}",
    )
    src.add_argument(
        "--time-field", default="TIMESTAMP", help="timestamp field (default %(default)s)"
    )
    src.add_argument(
        "--prompt-field", default="ContextTokens", help="prompt-token field (default %(default)s)"
    )
    src.add_argument(
        "--output-field", default="GeneratedTokens", help="output-token field (default %(default)s)"
    )
    src.add_argument("--model-field", default=None, help="model field (default: one model)")
    src.add_argument("--time-unit", choices=("s", "ms"), default="s", help="numeric timestamp unit")
    src.add_argument(
        "--timestamps",
        choices=("auto", "absolute", "relative"),
        default="auto",
        help="absolute times are re-based to the first request; relative ones kept (default auto)",
    )
    src.add_argument("--format", choices=("auto", "csv", "jsonl"), default="auto")
    src.add_argument("--start", type=_duration, default=0.0, help="skip this much of the trace")
    src.add_argument("--duration", type=_duration, default=None, help="replay only this much")
    src.add_argument(
        "--load-factor",
        type=int,
        default=1,
        help="send each request this many times (spread within its second) to scale the load",
    )
    src.add_argument("--synthetic-duration", type=_duration, default=3600.0)
    src.add_argument("--synthetic-rate", type=_positive, default=154.0, help="requests/min")
    src.add_argument("--synthetic-models", type=int, default=100)
    src.add_argument("--seed", type=int, default=1)

    world = parser.add_argument_group("world")
    world.add_argument(
        "--cold-start", type=_duration, default=60.0, help="median cold start (default 60s)"
    )
    world.add_argument(
        "--cold-start-sigma",
        type=float,
        default=0.0,
        help="log-normal spread of cold starts (0: fixed; 0.45: p90 1.8x the median)",
    )
    world.add_argument("--slo-ttft", type=_duration, default=2.0, help="TTFT threshold (2s)")
    world.add_argument("--target-concurrency", type=_positive, default=16.0)
    world.add_argument("--max-replicas", type=int, default=10)
    world.add_argument(
        "--policies",
        default=",".join(POLICY_NAMES),
        help=f"comma list from {', '.join(POLICY_NAMES + POOL_POLICIES)} (default: all "
        f"but {' and '.join(POOL_POLICIES)}, the shared pool with and without the warm tier)",
    )
    world.add_argument(
        "--tidal-warm-start",
        type=int,
        default=0,
        help="replicas Tidal's policies have warm at time 0 (default 0: start from zero)",
    )
    world.add_argument(
        "--annotation",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Tidal annotation for the 'tidal' policy (repeatable), as on a Deployment",
    )
    warm = parser.add_argument_group("the warm tier (policies tidal-pool, tidal-warm)")
    warm.add_argument(
        "--sleep-after",
        default=WARM_ANNOTATIONS["autoscaling.tidal.dev/sleep-after"],
        help="tidal-warm's sleep-after annotation (default %(default)s)",
    )
    warm.add_argument("--sleep-level", choices=("1", "2"), default="1")
    warm.add_argument(
        "--gpu-slices", type=int, default=4, help="time-sliced replicas per GPU (default 4)"
    )
    warm.add_argument("--gpu-memory-mib", type=int, default=81_920, help="per GPU (H100 80GB)")
    warm.add_argument(
        "--pool-kv-cache-tokens",
        type=int,
        default=100_000,
        help="KV cache of each model's pod, which sets how many fit awake (default 100000: two)",
    )
    spot = parser.add_argument_group("spot and prices")
    spot.add_argument(
        "--placement",
        choices=("on-demand", "spot", "spot-with-on-demand-baseline"),
        default="on-demand",
        help="add a 'tidal-spot' policy with this placement (Tidal's SpotHedge split)",
    )
    spot.add_argument("--on-demand-baseline", type=int, default=1)
    spot.add_argument(
        "--spot-preemptions-per-hour",
        type=float,
        default=0.0,
        help="Poisson rate of interruptions per spot replica-hour",
    )
    spot.add_argument("--spot-notice", type=_duration, default=120.0, help="AWS: 2m; GCP: 30s")
    spot.add_argument(
        "--spot-availability",
        type=float,
        default=1.0,
        help="long-run share of time each zone has spot capacity (SkyPilot traces: 0.17-0.79)",
    )
    spot.add_argument(
        "--spot-changes-per-day",
        type=float,
        default=5.5,
        help="spot availability state changes a day per zone (SkyPilot traces: about 5.5)",
    )
    spot.add_argument(
        "--spot-zones",
        type=int,
        default=1,
        help="zones whose spot capacity comes and goes independently; spot replicas spread "
        "over the available ones (SkyServe spreads over zones)",
    )
    spot.add_argument(
        "--preemption-trace", type=Path, default=None, help="file of seconds, one per line"
    )
    spot.add_argument("--price-on-demand", type=float, default=4.0, help="per GPU-hour")
    spot.add_argument("--spot-price-ratio", type=float, default=0.35)

    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON line, last on stdout")
    out.add_argument("--charts", type=Path, default=None, help="write PNG charts to this folder")
    out.add_argument(
        "--chart-policy", default="tidal", help="policy for the replicas-vs-load chart"
    )


def load_requests(args: argparse.Namespace) -> list[traces.TraceRequest]:
    """The workload the flags describe (a file, a named trace, or a synthetic one)."""
    name: str = args.trace
    if name.startswith("synthetic:"):
        kind = name.removeprefix("synthetic:")
        records = synthetic.generate(
            synthetic.SyntheticSpec(
                kind=kind,
                duration_s=args.synthetic_duration,
                requests_per_min=args.synthetic_rate,
                models=args.synthetic_models,
                seed=args.seed,
            )
        )
    else:
        fmt = traces.TraceFormat(
            time_field=args.time_field,
            prompt_field=args.prompt_field,
            output_field=args.output_field,
            model_field=args.model_field,
            time_unit=args.time_unit,
            timestamps=args.timestamps,
            kind=args.format,
        )
        records = traces.read_trace(traces.find_trace(name), fmt)
    records = traces.window(records, start_s=args.start, duration_s=args.duration)
    if args.load_factor < 1:
        raise traces.TraceError(f"--load-factor must be >= 1, got {args.load_factor}")
    if args.load_factor > 1:
        k = args.load_factor
        # Copies spread evenly within the second after the original, so a
        # burst stays a burst but is not k requests at one instant.
        records = sorted(
            (
                traces.TraceRequest(r.offset_s + j / k, r.prompt_tokens, r.output_tokens, r.model)
                for r in records
                for j in range(k)
            ),
            key=lambda r: r.offset_s,
        )
    if not records:
        raise traces.TraceError(f"{name}: no request in the window the flags select")
    return records


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
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--annotation wants KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


def options_from(args: argparse.Namespace) -> SimulationOptions:
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    spot_placement = (
        None
        if args.placement == "on-demand"
        else PlacementConfig(policy=args.placement, on_demand_baseline=args.on_demand_baseline)
    )
    world = WorldConfig(
        cold_start=ColdStart(args.cold_start, args.cold_start_sigma),
        spot=SpotModel(
            rate_per_hour=args.spot_preemptions_per_hour,
            notice_s=args.spot_notice,
            times_s=_preemption_times(args.preemption_trace),
            availability=args.spot_availability,
            changes_per_day=args.spot_changes_per_day,
            zones=args.spot_zones,
        ),
        seed=args.seed,
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
        tidal_warm_start=args.tidal_warm_start,
        pool=PoolConfig(
            slices=args.gpu_slices,
            gpu_memory_mib=args.gpu_memory_mib,
            kv_cache_tokens=args.pool_kv_cache_tokens,
        ),
        warm_annotations={
            "autoscaling.tidal.dev/sleep-after": args.sleep_after,
            "autoscaling.tidal.dev/sleep-level": args.sleep_level,
        },
    )


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(cards: list[Scorecard]) -> str:
    """The scorecard as a fixed-width text table."""
    header = (
        f"{'policy':<18} {'SLO':>6} {'goodput':>8} {'TTFT p50':>8} {'p99':>7} "
        f"{'cold':>5} {'wait p50':>8} {'p99':>6} {'failed':>6} {'GPU-h':>6} "
        f"{'busy':>6} {'idle':>6} {'asleep':>6} {'spot':>6} {'cost':>7} {'wakes':>5}"
    )
    lines = [header, "-" * len(header)]
    for c in cards:
        # A fleet or bound that misses the attainment goal carries a mark.
        name = f"{c.name}*" if c.reaches_target is False else c.name
        lines.append(
            f"{name:<18} {c.slo_attainment * 100:>5.1f}% {c.goodput_rps:>8.2f} "
            f"{_fmt(c.ttft_p50_s):>8} {_fmt(c.ttft_p99_s, 1):>7} {c.cold_starts:>5} "
            f"{_fmt(c.cold_start_wait_p50_s, 1):>8} {_fmt(c.cold_start_wait_p99_s, 1):>6} "
            f"{c.failed:>6} {c.gpu_seconds / 3600:>6.2f} {c.gpu_seconds_busy / 3600:>6.2f} "
            f"{c.gpu_seconds_idle / 3600:>6.2f} {c.gpu_seconds_asleep / 3600:>6.2f} "
            f"{c.gpu_seconds_spot / 3600:>6.2f} {c.cost:>7.2f} {c.wakes:>5}"
        )
    c0 = cards[0] if cards else None
    if c0 is not None:
        lines.append(
            f"SLO: TTFT <= {c0.slo_ttft_s:g}s (failed requests miss it); goodput in "
            "requests/s meeting it; cold = zero-to-ready transitions, wait in s; GPU-hours "
            "(asleep: held by sleeping pods only); oracle: a lower bound on GPU-hours at its SLO"
        )
        if any(c.reaches_target is False for c in cards):
            lines.append(
                "* no fleet up to --max-replicas reaches the 99 % goal: shown at the ceiling"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    started = time.process_time()
    try:
        requests = load_requests(args)
        options = options_from(args)
    except (traces.TraceError, traces.TracesMissingError, InvalidAnnotation, ValueError) as error:
        print(f"tidal simulate: {error}", file=sys.stderr)
        return 2
    try:
        runs: list[PolicyRun] = run_policies(requests, options)
    except ValueError as error:  # a bad annotation (--annotation, --sleep-after) says which
        print(f"tidal simulate: {error}", file=sys.stderr)
        return 2
    cards = [r.scorecard for r in runs]
    if args.charts is not None:
        from scaler.sim import charts

        try:
            written = charts.write_charts(runs, args.charts, focus=args.chart_policy)
        except charts.ChartsUnavailable as error:
            print(f"tidal simulate: {error}", file=sys.stderr)
            return 2
        for path in written:
            print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    elapsed = time.process_time() - started
    if args.json:
        print(json.dumps({"policies": [c.as_json() for c in cards], "cpu_s": round(elapsed, 2)}))
    else:
        print(
            f"{len(requests)} requests over {requests[-1].offset_s:.0f} s, cold start "
            f"{options.cold_start.median_s:g} s, target concurrency "
            f"{options.target_concurrency:g} per replica, at most {options.max_replicas}"
        )
        print(table(cards))
        print(f"simulated in {elapsed:.1f} s of CPU")
    return 0
