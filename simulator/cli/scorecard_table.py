"""The scorecard as a fixed-width text table, with the legend under it.

One row per card, the columns ``tidal simulate`` has always printed; a
routing column and the prefix-cache hit rate only when the run had
``--routing``, a cold-start column only with a ``--cold-start`` list, and a
last column with each row's frontier verdict when there are verdicts. A
fleet or bound that misses the attainment goal carries a ``*``.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.scorecard import Scorecard
from simulator.verdict import Verdict

__all__ = ["table"]


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
