"""PNG charts of a simulation: the Pareto view, and replicas against load over time.

- ``pareto.png``: SLO attainment against GPU-hours, one point per policy,
  and the fixed-fleet frontier (every fleet from one replica to the
  ceiling) as a line. Up and to the left is better; a policy is dominated
  when another, or a fleet, has both more attainment and fewer GPU-hours.
- ``replicas-<policy>.png``: for one policy, ready and asked-for replicas
  per second over the run, with the load (requests held plus in flight)
  on a second axis.

matplotlib comes with the ``loadtest`` extra; it is imported here only, and
only when charts are asked for, with a clear error when it is missing. The
Agg backend draws without a display.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.runner import PolicyRun

__all__ = ["ChartsUnavailable", "write_charts"]


class ChartsUnavailable(RuntimeError):
    """matplotlib is not installed, or the chosen policy is not in the run."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ChartsUnavailable(
            "charts need matplotlib, which comes with the 'loadtest' extra: "
            "pip install 'tidal-autoscaler[loadtest]' (or drop --charts)"
        ) from error
    return plt


def write_charts(runs: Sequence[PolicyRun], folder: Path, *, focus: str) -> list[Path]:
    """Write the Pareto chart and the replicas chart of ``focus``; return their paths."""
    chosen = [
        r
        for r in runs
        if r.result is not None
        and (r.scorecard.name == focus or r.scorecard.name.startswith(focus))
    ]
    if not chosen:
        names = [r.scorecard.name for r in runs if r.result is not None]
        raise ChartsUnavailable(f"no policy {focus!r} in this run to chart; ran {names}")
    plt = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in runs:
        if run.fleets:
            ax.plot(
                [p.gpu_seconds / 3600 for p in run.fleets],
                [p.slo_attainment * 100 for p in run.fleets],
                color="tab:gray",
                marker=".",
                linewidth=1,
                label="fixed fleets, 1 to the ceiling",
            )
            for p in run.fleets:
                ax.annotate(
                    str(p.replicas),
                    (p.gpu_seconds / 3600, p.slo_attainment * 100),
                    textcoords="offset points",
                    xytext=(0, -10),
                    fontsize=6,
                    color="tab:gray",
                )
    for run in runs:
        card = run.scorecard
        hours = card.gpu_seconds / 3600
        ax.scatter(hours, card.slo_attainment * 100, s=40)
        ax.annotate(
            card.name,
            (hours, card.slo_attainment * 100),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=8,
        )
    ax.set_xlabel("GPU-hours")
    ax.set_ylabel(f"SLO attainment, % (TTFT <= {runs[0].scorecard.slo_ttft_s:g} s)")
    ax.set_title("SLO attainment against GPU-hours (up and left is better)")
    ax.grid(True, alpha=0.3)
    if any(run.fleets for run in runs):
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path = folder / "pareto.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    run = chosen[0]
    assert run.result is not None  # chosen only among runs
    timeline = run.result.timeline
    t = [s.at_s / 60 for s in timeline]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.step(t, [s.spec for s in timeline], where="post", label="asked for", color="tab:orange")
    ax.step(t, [s.ready for s in timeline], where="post", label="ready", color="tab:blue")
    ax.set_xlabel("minutes")
    ax.set_ylabel("replicas")
    load = ax.twinx()
    load.plot(
        t,
        [s.concurrency for s in timeline],
        color="tab:gray",
        alpha=0.5,
        linewidth=0.7,
        label="load (held + in flight)",
    )
    load.set_ylabel("requests held + in flight (mean per second)")
    ax.set_title(f"{run.scorecard.name}: replicas against load")
    lines = ax.get_legend_handles_labels()
    more = load.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper right", fontsize=8)
    fig.tight_layout()
    path = folder / f"replicas-{run.scorecard.name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
