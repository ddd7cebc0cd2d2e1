"""Regenerate the simulator's result tables in docs/ from runs on this code.

``python -m scripts.simulator_tables`` (``make sim-docs``) runs, in simulated
time, what the pages quote and rewrites each block between its markers::

    <!-- BEGIN generated:NAME by `python -m scripts.simulator_tables` -->
    ...
    <!-- END generated:NAME -->

- ``code-scorecard`` (docs/simulator.md): ``tidal simulate --trace code
  --cold-start 60s``, the table as the command prints it, and the charts in
  docs/simulator/ (the Pareto chart, Tidal's and tuned Tidal's replicas);
- ``code-ratios`` (docs/simulator.md): each row's GPU-seconds against the
  always-on fleet and the oracle, from the same run;
- ``code-seeds`` (docs/simulator.md): the same trace over five seeds with
  log-normal cold starts (``--cold-start-sigma 0.45 --seeds 5``): mean and
  spread;
- ``slo-scenarios`` (docs/simulator.md): SLO-first Tidal on every scenario
  the SLO work is judged on (the code and conversation traces,
  ``synthetic:bursts``, ``synthetic:diurnal``, ``synthetic:many-models`` with
  40 models over 6 h; cold starts of 20 s and 60 s; seeds 1 to 3): Tidal's
  attainment and GPU-hours (mean and spread), the oracle's, the smallest
  fixed fleet reaching Tidal's attainment, the baselines that dominate it
  (more attainment for fewer GPU-seconds, means over the seeds), and each
  of the targets, held or not;
- ``many-models`` (docs/simulator.md and docs/warm-tier.md): 4 h of
  ``synthetic:many-models`` with ``tidal``, ``tidal-pool`` and
  ``tidal-warm`` at grace periods of 5 and 15 minutes;
- ``warm-tier`` (docs/warm-tier.md): ``tidal-pool`` against ``tidal-warm``
  on the same 4 h at cold starts of 20 s and 60 s, seeds 1 to 3 (mean and
  range), with the wakes that fell back to a cold start.

Main decision: the runs go through the command's own argument parser and
functions (:mod:`scaler.sim.cli`), so a table shows what a user who types
the shown command sees; the prose around the blocks is written by hand and
must be re-read when the numbers move. ``--only NAME`` regenerates one block
(the runs cost minutes of CPU: the many-models run most). A unit test checks
the cheap part without running anything: that the scorecard block's header
is the one the command prints now.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from scaler.sim import charts, cli
from scaler.sim.runner import PolicyRun, _by_model, run_policies, smallest_always_on
from scaler.sim.scorecard import Scorecard, score
from scaler.sim.warm_tier import run_pool

__all__ = ["BLOCKS", "block_text", "main", "replace_block"]

ROOT = Path(__file__).resolve().parent.parent
SIMULATOR = ROOT / "docs" / "simulator.md"
WARM_TIER = ROOT / "docs" / "warm-tier.md"
_BEGIN = "<!-- BEGIN generated:{name} by `python -m scripts.simulator_tables` -->"
_END = "<!-- END generated:{name} -->"


def _args(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(list(flags))


def _runs(*flags: str) -> tuple[argparse.Namespace, list[PolicyRun]]:
    args = _args(*flags)
    return args, run_policies(cli.load_requests(args), cli.options_from(args))


CODE = ("--trace", "code", "--cold-start", "60s")
_code_cache: list[list[PolicyRun]] = []


def _code_runs() -> list[PolicyRun]:
    if not _code_cache:
        _code_cache.append(_runs(*CODE)[1])
    return _code_cache[0]


def code_scorecard() -> str:
    runs = _code_runs()
    folder = ROOT / "docs" / "simulator"
    charts.write_charts(runs, folder, focus="tidal")
    charts.write_charts(runs, folder, focus="tidal-tuned")
    args = _args(*CODE)
    requests = cli.load_requests(args)
    head = (
        f"{len(requests)} requests over {requests[-1].offset_s:.0f} s, cold start 60 s, "
        "target concurrency 16 per replica, at most 10"
    )
    return "```\n" + head + "\n" + cli.table([r.scorecard for r in runs]) + "\n```"


def _ratio(card: Scorecard, base: Scorecard) -> str:
    return f"{card.gpu_seconds / base.gpu_seconds:.2f}x" if base.gpu_seconds > 0 else "-"


def code_ratios() -> str:
    cards = [r.scorecard for r in _code_runs()]
    always = next(c for c in cards if c.name.startswith("always-on"))
    oracle = next(c for c in cards if c.name == "oracle")
    lines = [
        "| policy | SLO | GPU-s | vs always-on | vs oracle | failed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in cards:
        lines.append(
            f"| `{c.name}` | {c.slo_attainment * 100:.1f} % | {c.gpu_seconds:,.0f} | "
            f"{_ratio(c, always)} | {_ratio(c, oracle)} | {c.failed} |"
        )
    return "\n".join(lines)


def code_seeds() -> str:
    flags = (*CODE, "--cold-start-sigma", "0.45")
    rows = []
    per_seed = [_runs(*flags, "--seed", str(seed))[1] for seed in range(1, 6)]
    for index in range(len(per_seed[0])):
        rows.append(cli.mean_card([runs[index].scorecard for runs in per_seed]))
    lines = [
        "| policy | SLO mean | SLO min..max | GPU-h mean | GPU-h min..max | cold mean "
        "| failed mean |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for card, spread in rows:
        lo, hi = spread["slo_attainment"]
        glo, ghi = spread["gpu_seconds"]
        lines.append(
            f"| `{card.name}` | {card.slo_attainment * 100:.1f} % | "
            f"{lo * 100:.1f}..{hi * 100:.1f} % | {card.gpu_seconds / 3600:.2f} | "
            f"{glo / 3600:.2f}..{ghi / 3600:.2f} | {card.cold_starts:.1f} | {card.failed:.1f} |"
        )
    return "\n".join(lines)


#: The scenarios of ``slo-scenarios``: (label, flags).
SCENARIOS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("code", ("--trace", "code")),
    ("conv", ("--trace", "conv")),
    ("bursts", ("--trace", "synthetic:bursts")),
    ("diurnal", ("--trace", "synthetic:diurnal")),
    (
        "many-models",
        (
            "--trace",
            "synthetic:many-models",
            "--synthetic-models",
            "40",
            "--synthetic-duration",
            "6h",
        ),
    ),
)
SCENARIO_COLD_STARTS = ("20s", "60s")
SCENARIO_SEEDS = (1, 2, 3)
# The baselines a scenario compares Tidal with (Tidal's own variants are not
# baselines) and the oracle.
_SCENARIO_POLICIES = "always-on,hpa,keda-http,knative-kpa,knative-tidal-idle,planner,tidal,oracle"


def _fleet_at(flags: tuple[str, ...], attainment: float) -> float:
    """GPU-seconds of the smallest fixed fleet (per model) reaching ``attainment``."""
    args = _args(*flags)
    requests = cli.load_requests(args, warn=False)
    options = replace(cli.options_from(args), always_on_attainment=attainment)
    total = 0.0
    for group in _by_model(requests):
        _, result = smallest_always_on(group, options)
        total += score(result, slo_ttft_s=options.slo_ttft_s).gpu_seconds
    return total


def _mean(cards: list[Scorecard], field: str) -> float:
    return statistics.fmean(float(getattr(c, field)) for c in cards)


def _span(cards: list[Scorecard], field: str, scale: float, digits: int) -> str:
    values = [float(getattr(c, field)) * scale for c in cards]
    return f"{min(values):.{digits}f}..{max(values):.{digits}f}"


def _mark(ok: bool) -> str:
    return "yes" if ok else "**no**"


def slo_scenarios() -> str:
    lines = [
        "| trace | cold start | `tidal` SLO (min..max) | GPU-h (min..max) | oracle SLO, GPU-h "
        "| vs oracle | fleet at Tidal's SLO, GPU-h | vs fleet | dominated by "
        "| SLO goal | <= 1.5x oracle | <= 0.7x fleet |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, trace in SCENARIOS:
        for cold in SCENARIO_COLD_STARTS:
            flags = (*trace, "--cold-start", cold, "--policies", _SCENARIO_POLICIES)
            per_seed = [_runs(*flags, "--seed", str(seed))[1] for seed in SCENARIO_SEEDS]
            by_name: dict[str, list[Scorecard]] = {}
            for runs in per_seed:
                for run in runs:
                    name = (
                        "always-on"
                        if run.scorecard.name.startswith("always-on")
                        else (run.scorecard.name)
                    )
                    by_name.setdefault(name, []).append(run.scorecard)
            tidal, oracle = by_name["tidal"], by_name["oracle"]
            slo, gpu = _mean(tidal, "slo_attainment"), _mean(tidal, "gpu_seconds")
            o_slo, o_gpu = _mean(oracle, "slo_attainment"), _mean(oracle, "gpu_seconds")
            fleet = statistics.fmean(
                _fleet_at((*trace, "--cold-start", cold, "--seed", str(seed)), c.slo_attainment)
                for seed, c in zip(SCENARIO_SEEDS, tidal, strict=True)
            )
            dominated = [
                f"`{name}`"
                for name, cards in by_name.items()
                if name not in ("tidal", "oracle")
                and _mean(cards, "slo_attainment") > slo
                and _mean(cards, "gpu_seconds") < gpu
            ]
            if fleet < gpu:
                dominated.append("a fixed fleet")
            goal = 0.99 if o_slo >= 0.99 - 1e-9 else o_slo - 0.01
            fleet_check = _mark(gpu <= 0.7 * fleet) if label in ("diurnal", "many-models") else "-"
            lines.append(
                f"| {label} | {cold} | {slo * 100:.1f} % ({_span(tidal, 'slo_attainment', 100, 1)})"
                f" | {gpu / 3600:.2f} ({_span(tidal, 'gpu_seconds', 1 / 3600, 2)})"
                f" | {o_slo * 100:.1f} %, {o_gpu / 3600:.2f} | {gpu / o_gpu:.2f}x"
                f" | {fleet / 3600:.2f} | {gpu / fleet:.2f}x"
                f" | {', '.join(dominated) or 'none'}"
                f" | {_mark(slo >= goal - 1e-9)} | {_mark(gpu <= 1.5 * o_gpu)} | {fleet_check} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


_LABELS = {
    "tidal": "`tidal` (world per model, for scale)",
    "tidal-pool": "`tidal-pool` (scale-to-zero alone)",
    "tidal-warm": "`tidal-warm`",
}


def many_models() -> str:
    lines = [
        "| grace | policy | SLO | TTFT p99 (s) | cold | GPU-h | asleep GPU-h | cost | wakes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for grace, label in (("5m", "5m (default)"), ("15m", "15m")):
        _, runs = _runs(
            "--trace",
            "synthetic:many-models",
            "--synthetic-duration",
            "4h",
            "--policies",
            "tidal,tidal-pool,tidal-warm",
            "--annotation",
            f"scale-to-zero-grace-period={grace}",
        )
        for run in runs:
            c = run.scorecard
            p99 = "-" if c.ttft_p99_s is None else f"{c.ttft_p99_s:.1f}"
            lines.append(
                f"| {label} | {_LABELS[c.name]} | {c.slo_attainment * 100:.1f} % | {p99} | "
                f"{c.cold_starts} | {c.gpu_seconds / 3600:.2f} | "
                f"{c.gpu_seconds_asleep / 3600:.2f} | {c.cost:.2f} | {c.wakes} |"
            )
    return "\n".join(lines)


#: The warm tier's table: cold starts and seeds, each policy's runs on the same trace.
WARM_COLD_STARTS = ("20s", "60s")
WARM_SEEDS = (1, 2, 3)


def _spread(values: list[float], fmt: str) -> str:
    """Mean and range over seeds, e.g. ``98.7 (98.4-99.1)``."""
    mean = statistics.fmean(values)
    return f"{mean:{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def warm_tier() -> str:
    """``tidal-pool`` against ``tidal-warm`` on 4 h of ``synthetic:many-models``
    (100 models) at each cold start of :data:`WARM_COLD_STARTS`, over
    :data:`WARM_SEEDS`: attainment and GPU-hours (mean and range), the warm
    tier's GPU-hours against the pool's, the GPU-hours split by what the pods
    did, and the wakes that fell back to a cold start for want of room."""
    lines = [
        "| cold start | policy | SLO % | GPU-h | x pool | awake / asleep / starting GPU-h "
        "| cold | wakes | fell back |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for cold in WARM_COLD_STARTS:
        pool_gpu: list[float] = []
        for policy in ("tidal-pool", "tidal-warm"):
            slo, gpu, awake, asleep, starting, colds, wakes, fell = ([] for _ in range(8))
            for seed in WARM_SEEDS:
                args = _args(
                    "--trace", "synthetic:many-models", "--synthetic-duration", "4h",
                    "--cold-start", cold, "--seed", str(seed), "--policies", policy,
                )  # fmt: skip
                options = cli.options_from(args)
                annotations = {**options.shared_annotations(), **options.tidal_annotations}
                if policy == "tidal-warm":
                    annotations |= options.warm_annotations
                run = run_pool(
                    cli.load_requests(args),
                    name=policy,
                    annotations=annotations,
                    pool=options.pool,
                    world=options.world,
                    slo_ttft_s=options.slo_ttft_s,
                    prices=options.prices,
                )
                c = run.scorecard
                slo.append(c.slo_attainment * 100)
                gpu.append(c.gpu_seconds / 3600)
                awake.append(c.gpu_seconds_awake / 3600)
                asleep.append(c.gpu_seconds_asleep / 3600)
                starting.append(c.gpu_seconds_starting / 3600)
                colds.append(float(c.cold_starts))
                wakes.append(float(run.counts.wakes))
                tried = run.counts.wakes + run.counts.fallbacks
                fell.append(100 * run.counts.fallbacks / tried if tried else 0.0)
            if policy == "tidal-pool":
                pool_gpu = gpu
            ratio = [g / p for g, p in zip(gpu, pool_gpu, strict=True)]
            split = " / ".join(f"{statistics.fmean(v):.1f}" for v in (awake, asleep, starting))
            lines.append(
                f"| {cold} | `{policy}` | {_spread(slo, '.1f')} | {_spread(gpu, '.1f')} | "
                f"{_spread(ratio, '.2f')} | {split} | {statistics.fmean(colds):.0f} | "
                f"{statistics.fmean(wakes):.0f} | "
                + ("-" if policy == "tidal-pool" else f"{_spread(fell, '.1f')} %")
                + " |"
            )
    return "\n".join(lines)


#: Each block: what renders it, and the pages that carry it.
BLOCKS: dict[str, tuple[Callable[[], str], tuple[Path, ...]]] = {
    "code-scorecard": (code_scorecard, (SIMULATOR,)),
    "code-ratios": (code_ratios, (SIMULATOR,)),
    "code-seeds": (code_seeds, (SIMULATOR,)),
    "slo-scenarios": (slo_scenarios, (SIMULATOR,)),
    "many-models": (many_models, (SIMULATOR, WARM_TIER)),
    "warm-tier": (warm_tier, (WARM_TIER,)),
}


def block_text(page: str, name: str) -> str:
    """The current content of block ``name`` in ``page`` (ValueError when absent)."""
    pattern = re.escape(_BEGIN.format(name=name)) + r"\n(.*?)\n" + re.escape(_END.format(name=name))
    found = re.search(pattern, page, flags=re.S)
    if found is None:
        raise ValueError(f"no generated block {name!r}; add its BEGIN and END markers")
    return found.group(1)


def replace_block(page: str, name: str, content: str) -> str:
    old = block_text(page, name)
    begin = _BEGIN.format(name=name)
    return page.replace(f"{begin}\n{old}\n", f"{begin}\n{content}\n", 1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.simulator_tables")
    parser.add_argument("--only", choices=sorted(BLOCKS), action="append", default=None)
    args = parser.parse_args(argv)
    for name in args.only or list(BLOCKS):
        render, pages = BLOCKS[name]
        content = render()
        for path in pages:
            path.write_text(replace_block(path.read_text(), name, content))
            print(f"{path.relative_to(ROOT)}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
