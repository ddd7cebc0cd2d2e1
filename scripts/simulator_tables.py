"""Regenerate every table and chart in docs/simulator.md (and the warm tier's) from runs.

``python -m scripts.simulator_tables`` (``make sim-docs``) runs, in simulated
time, what the pages quote and rewrites each block between its markers::

    <!-- BEGIN generated:NAME by `python -m scripts.simulator_tables` -->
    ...
    <!-- END generated:NAME -->

Two kinds of block:

- **a command and what it prints** (:data:`COMMANDS`): the block shows
  ``$ tidal simulate FLAGS`` and the command's own output, produced by
  running it through the command's parser and :func:`simulator.cli.run`,
  less the CPU-time line (the only part that changes from run to run). A
  reader who types the command gets the block;
- **tables assembled from several runs** (``slo-scenarios``,
  ``many-models``): each row names the command that produced it.

The warm tier's page has one more: ``warm-tier`` (docs/warm-tier.md),
``tidal-pool`` against ``tidal-warm`` on 4 h of ``synthetic:many-models`` at
cold starts of 20 s and 60 s, seeds 1 to 3 (mean and range), with the wakes
that fell back to a cold start. The GPU shapes' page has ``shapes``
(docs/shapes.md): ``tidal simulate --shapes all`` on the code and conv
traces, 30 models of ``synthetic:many-models`` and ``synthetic:long-prompt``,
each command and what it prints.

Main decision: nothing in the pages is typed by hand where a run can say
it, so a figure cannot go stale without a block changing. ``--only NAME``
regenerates one block. The unit test checks that every ``tidal simulate``
command shown with output in docs/simulator.md sits in a generated block,
and runs the cheapest block's command to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import statistics
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from simulator import cli
from simulator.runner import WARM_ANNOTATIONS, PolicyRun, tidal_annotations
from simulator.scorecard import Scorecard
from simulator.warm_tier import PoolRun, run_pool

__all__ = ["BLOCKS", "COMMANDS", "block_text", "command_output", "main", "replace_block"]

ROOT = Path(__file__).resolve().parent.parent
SIMULATOR = ROOT / "docs" / "simulator.md"
WARM_TIER = ROOT / "docs" / "warm-tier.md"
SHAPES = ROOT / "docs" / "shapes.md"
_BEGIN = "<!-- BEGIN generated:{name} by `python -m scripts.simulator_tables` -->"
_END = "<!-- END generated:{name} -->"

_BASELINES = "always-on,hpa,keda-http,knative-kpa,planner,tidal,reactive,oracle"

#: Blocks that show one command and its output: name -> the command's flags.
COMMANDS: dict[str, tuple[str, ...]] = {
    "code-scorecard": ("--trace", "code", "--charts", "docs/simulator"),
    "code-cold-starts": (
        "--trace", "code", "--cold-start", "60s,20s,5s,2s", "--policies", _BASELINES,
    ),
    "code-zero-start": ("--trace", "code", "--start", "zero", "--policies", _BASELINES),
    "code-seeds": (
        "--trace", "code", "--cold-start-sigma", "0.45", "--seeds", "3", "--policies", _BASELINES,
    ),
    "diurnal-peak": (
        "--trace", "synthetic:diurnal", "--synthetic-rate", "1500", "--synthetic-duration", "20m",
        "--day-length", "20m", "--skip", "8m", "--duration", "4m", "--policies", "always-on",
    ),
    "sweep-default": ("--trace", "code", "--policies", "tidal-concurrency"),
    "sweep-panic": (
        "--trace", "code", "--policies", "tidal-concurrency",
        "--annotation", "panic-window-percentage=100",
    ),
    "sweep-grace": (
        "--trace", "code", "--policies", "tidal-concurrency",
        "--annotation", "scale-to-zero-grace-period=120s",
    ),
    "chat-routing": (
        "--trace", "synthetic:chat", "--synthetic-duration", "5m", "--synthetic-rate", "5500",
        "--routing", "least-loaded,prefix", "--policies", "always-on,oracle",
    ),
    "spot": (
        "--trace", "code", "--policies", "tidal", "--placement", "spot",
        "--spot-availability", "0.5", "--spot-zones", "3",
    ),
}  # fmt: skip


def _parse(flags: tuple[str, ...]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tidal simulate")
    cli.configure(parser)
    return parser.parse_args(list(flags))


def command_output(flags: tuple[str, ...]) -> str:
    """What ``tidal simulate FLAGS`` prints, less its CPU-time line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.run(_parse(flags))
    if code != 0:
        raise RuntimeError(f"tidal simulate {shlex.join(flags)} exited {code}")
    lines = [x for x in out.getvalue().splitlines() if not x.startswith("simulated in ")]
    return "\n".join(lines)


def _command_block(name: str) -> str:
    flags = COMMANDS[name]
    return f"```\n$ tidal simulate {shlex.join(flags)}\n{command_output(flags)}\n```"


#: The scenarios of ``slo-scenarios``: (label, flags), all at a 60 s cold start.
SCENARIOS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("code", ("--trace", "code")),
    ("conv", ("--trace", "conv")),
    ("bursts", ("--trace", "synthetic:bursts")),
    (
        "diurnal",
        (
            "--trace",
            "synthetic:diurnal",
            "--synthetic-rate",
            "1500",
            "--synthetic-duration",
            "20m",
            "--day-length",
            "20m",
        ),
    ),
    (
        "chat",
        (
            "--trace",
            "synthetic:chat",
            "--synthetic-rate",
            "5500",
            "--synthetic-duration",
            "15m",
            "--skip",
            "5m",
        ),
    ),
    ("long-context", ("--trace", "synthetic:long-context")),
)


def _scenario_runs(flags: tuple[str, ...]) -> list[PolicyRun]:
    args = _parse((*flags, "--policies", _BASELINES))
    requests = cli.load_requests(args, warn=False)
    return cli.variant_policies(requests, cli.options_from(args), args)


def _pair(card: Scorecard) -> str:
    return f"{card.slo_attainment * 100:.1f} %, {card.gpu_seconds / 3600:.2f}"


def _scenario_row(scenario: tuple[str, tuple[str, ...]]) -> str:
    label, flags = scenario
    runs = _scenario_runs(flags)
    cards = {r.scorecard.name: r.scorecard for r in runs}
    fleets = next(r.fleets for r in runs if r.fleets)
    tidal, planner = cards["tidal"], cards["planner"]
    # The largest fleet costing no more than the planner (at least one replica).
    within = [p for p in fleets if p.gpu_seconds <= planner.gpu_seconds * (1 + 1e-9)]
    fleet = within[-1] if within else fleets[0]
    ratio = planner.slo_attainment / fleet.slo_attainment if fleet.slo_attainment else 0
    dominating = [
        str(p.replicas)
        for p in fleets
        if p.slo_attainment > tidal.slo_attainment and p.gpu_seconds < tidal.gpu_seconds
    ]
    row = (
        f"| {label} | {_pair(tidal)} | {_pair(cards['reactive'])} | {_pair(planner)} "
        f"| {fleet.replicas}: {fleet.slo_attainment * 100:.1f} %, "
        f"{fleet.gpu_seconds / 3600:.2f} | {ratio * 100:.0f} % | {_pair(cards['oracle'])} "
        f"| {', '.join(dominating) or 'none'} |"
    )
    print(row, file=sys.stderr, flush=True)
    return row


def slo_scenarios() -> str:
    """One row per scenario; three scenarios at a time, each in its own process."""
    lines = [
        "| scenario | `tidal` SLO, GPU-h | `reactive` | `planner` | fleet the planner "
        "spends as much as: SLO, GPU-h | planner / that fleet's SLO | `oracle` "
        "| fleets dominating `tidal` |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    with ProcessPoolExecutor(max_workers=3) as pool:
        lines.extend(pool.map(_scenario_row, SCENARIOS))
    commands = [
        f"{label}: tidal simulate {shlex.join(flags)} --policies {_BASELINES}"
        for label, flags in SCENARIOS
    ]
    return "\n".join(lines) + "\n\n```\n" + "\n".join(commands) + "\n```"


_LABELS = {
    "tidal": "`tidal` (world per model, for scale)",
    "tidal-pool": "`tidal-pool` (scale-to-zero alone)",
    "tidal-warm": "`tidal-warm`",
}


def many_models() -> str:
    lines = [
        "| grace | policy | SLO | TTFT p99 (s) | cold | GPU-h | sleeping-only GPU-h | cost "
        "| wakes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for grace, label in (("5m", "5m (default)"), ("15m", "15m")):
        flags = (
            "--trace", "synthetic:many-models", "--synthetic-duration", "4h",
            "--policies", "tidal,tidal-pool,tidal-warm",
            "--annotation", f"scale-to-zero-grace-period={grace}",
        )  # fmt: skip
        args = _parse(flags)
        runs = cli.variant_policies(cli.load_requests(args), cli.options_from(args), args)
        for run in runs:
            c = run.scorecard
            p99 = "-" if c.ttft_p99_s is None else f"{c.ttft_p99_s:.1f}"
            lines.append(
                f"| {label} | {_LABELS[c.name]} | {c.slo_attainment * 100:.1f} % | {p99} | "
                f"{c.cold_starts} | {c.gpu_seconds / 3600:.2f} | "
                f"{c.gpu_seconds_sleeping_only / 3600:.2f} | {c.cost:.2f} | {c.wakes} |"
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
    tier's GPU-hours against the pool's, the GPU-hours split by what the
    devices did, cold starts, wakes, the wakes that fell back to a cold start,
    and the moves that emptied devices."""
    lines = [
        "| cold start | policy | SLO % | GPU-h | x pool | serving / starting / sleeping-only "
        "GPU-h | cold | wakes | fell back | level 2 | moves |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for cold in WARM_COLD_STARTS:
        pool_gpu: list[float] = []
        for policy in ("tidal-pool", "tidal-warm"):
            runs = [_pool_run(policy, cold, seed) for seed in WARM_SEEDS]
            cards = [r.scorecard for r in runs]
            gpu = [c.gpu_seconds / 3600 for c in cards]
            if policy == "tidal-pool":
                pool_gpu = gpu
            ratio = [g / p for g, p in zip(gpu, pool_gpu, strict=True)]
            split = " / ".join(
                f"{statistics.fmean(getattr(c, f) for c in cards) / 3600:.1f}"
                for f in (
                    "gpu_seconds_serving",
                    "gpu_seconds_starting",
                    "gpu_seconds_sleeping_only",
                )
            )
            fell = [
                100 * r.counts.fallbacks / max(1, r.counts.wakes + r.counts.fallbacks) for r in runs
            ]
            fell_text = f"{_spread(fell, '.1f')} %" if policy == "tidal-warm" else "-"
            slo = _spread([c.slo_attainment * 100 for c in cards], ".1f")
            lines.append(
                f"| {cold} | `{policy}` | {slo} "
                f"| {_spread(gpu, '.1f')} | {_spread(ratio, '.2f')} | {split} "
                f"| {statistics.fmean(c.cold_starts for c in cards):.0f} "
                f"| {statistics.fmean(r.counts.wakes for r in runs):.0f} "
                f"| {fell_text} "
                f"| {statistics.fmean(r.counts.level2_sleeps for r in runs):.0f} "
                f"| {statistics.fmean(r.counts.moves for r in runs):.0f} |"
            )
    return "\n".join(lines)


def _pool_run(policy: str, cold: str, seed: int) -> PoolRun:
    """One pool row as ``tidal simulate`` runs it (the same annotations)."""
    args = _parse(
        (
            "--trace", "synthetic:many-models", "--synthetic-duration", "4h",
            "--cold-start", cold, "--seed", str(seed), "--policies", policy,
        )
    )  # fmt: skip
    options = cli.options_from(args)
    annotations = tidal_annotations(policy, options)
    if policy == "tidal-warm":
        annotations |= options.warm_annotations
    else:
        annotations = {k: v for k, v in annotations.items() if k not in WARM_ANNOTATIONS}
    return run_pool(
        cli.load_requests(args),
        name=policy,
        annotations=annotations,
        pool=options.pool,
        world=options.world,
        slo_ttft_s=options.slo_ttft_s,
        prices=options.prices,
    )


#: The commands of ``shapes`` (docs/shapes.md): each trace with ``--shapes all``.
SHAPE_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--trace", "code", "--shapes", "all"),
    ("--trace", "conv", "--shapes", "all"),
    ("--trace", "synthetic:many-models", "--synthetic-models", "30", "--shapes", "all"),
    ("--trace", "synthetic:long-prompt", "--shapes", "all"),
)


def shapes() -> str:
    """Each of :data:`SHAPE_COMMANDS` and what it prints, two at a time, each in its
    own process."""
    with ProcessPoolExecutor(max_workers=2) as pool:
        outputs = list(pool.map(command_output, SHAPE_COMMANDS))
    return "\n\n".join(
        f"```\n$ tidal simulate {shlex.join(flags)}\n{output}\n```"
        for flags, output in zip(SHAPE_COMMANDS, outputs, strict=True)
    )


#: Each block: what renders it, and the pages that carry it.
BLOCKS: dict[str, tuple[Callable[[], str], tuple[Path, ...]]] = {
    **{name: (lambda name=name: _command_block(name), (SIMULATOR,)) for name in COMMANDS},  # type: ignore[misc]
    "slo-scenarios": (slo_scenarios, (SIMULATOR,)),
    "many-models": (many_models, (SIMULATOR, WARM_TIER)),
    "warm-tier": (warm_tier, (WARM_TIER,)),
    "shapes": (shapes, (SHAPES,)),
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
    parser.add_argument(
        "--only",
        choices=sorted(BLOCKS),
        action="append",
        default=None,
        metavar="NAME",
        help=f"regenerate this block only (repeatable; default: all of {', '.join(BLOCKS)})",
    )
    args = parser.parse_args(argv)
    for name in args.only or list(BLOCKS):
        render, pages = BLOCKS[name]
        content = render()
        for path in pages:
            path.write_text(replace_block(path.read_text(), name, content))
            print(f"{path.relative_to(ROOT)}: {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
