"""What the spot story (``tidal demo --story spot``) saw, its verdict and its summary table.

Pure: :class:`SpotFigures` is filled by :mod:`loadtests.demo.spot_story`
from what it observed (replica counts from the cluster's store, Events,
requests on the client's clock, the scaler's cost), and turns it into the
JSON line, the list of problems (empty when the story happened as told)
and the table a person reads. The verdict's one decision: the story counts
only if the model reached one on-demand and three spot replicas, one spot
node was preempted, on-demand covered and went back to the baseline, both
``SpotFallback`` and ``SpotRecovered`` were seen, and no request failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtests.demo.observe import RequestResult, percentile

__all__ = ["Half", "SpotFigures", "summary_table"]


@dataclass(frozen=True, slots=True)
class Half:
    """One Deployment of the pair: asked for, Ready, pods that exist."""

    desired: int = 0
    ready: int = 0
    pods: int = 0


@dataclass
class SpotFigures:
    """What the story saw; every field observed."""

    results: list[RequestResult] = field(default_factory=list)
    peak_on_demand: int = 0
    peak_spot: int = 0
    final_on_demand: Half = field(default_factory=Half)
    final_spot: Half = field(default_factory=Half)
    zones: dict[str, int] = field(default_factory=dict)
    preempted_node: str = ""
    preemptions: int = 0
    fallback_s: float | None = None  # notice -> on-demand asked for more than the baseline
    cover_ready_s: float | None = None  # notice -> that extra on-demand replica Ready
    recovered_s: float | None = None  # notice -> on-demand back at the baseline
    events: list[str] = field(default_factory=list)
    cost: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        ok = [r for r in self.results if r.ok]
        ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
        return {
            "story": "spot",
            "requests": len(self.results),
            "succeeded": len(ok),
            "failed": len(self.results) - len(ok),
            "preemptions": self.preemptions,
            "preempted_node": self.preempted_node,
            "fallback_s": _round(self.fallback_s),
            "cover_ready_s": _round(self.cover_ready_s),
            "recovered_s": _round(self.recovered_s),
            "peak_spot": self.peak_spot,
            "peak_on_demand": self.peak_on_demand,
            "final_spot": self.final_spot.ready,
            "final_on_demand": self.final_on_demand.ready,
            "spot_zones": dict(sorted(self.zones.items())),
            "events": self.events,
            "ttft_p50_s": _round(percentile(ttfts, 50)),
            "ttft_p99_s": _round(percentile(ttfts, 99)),
            "dollars_per_hour": _cost(self.cost, "dollars_per_hour"),
            "saving_dollars_per_hour": _cost(self.cost, "saving_dollars_per_hour"),
        }

    def problems(self) -> list[str]:
        """Why the story did not show what it should (empty when it did)."""
        figures = self.as_json()
        found = []
        if figures["requests"] == 0:
            found.append("no request was sent")
        if figures["failed"]:
            found.append(f"{figures['failed']} request(s) failed")
        if self.peak_spot < 3 or self.peak_on_demand < 1:
            found.append(
                f"peak ready was {self.peak_on_demand} on-demand and {self.peak_spot} spot, "
                "expected 1 and 3"
            )
        if self.preemptions != 1:
            found.append("no spot node was preempted")
        if self.fallback_s is None:
            found.append("on-demand never covered the preempted spot replica")
        if self.recovered_s is None:
            found.append("on-demand never went back to the baseline")
        for reason in ("SpotFallback", "SpotRecovered"):
            if reason not in self.events:
                found.append(f"no {reason} Event")
        return found


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _cost(cost: dict[str, Any] | None, key: str) -> float | None:
    value = (cost or {}).get(key)
    return round(float(value), 4) if isinstance(value, int | float) else None


def summary_table(figures: SpotFigures, problems: list[str], wall_s: float) -> str:
    doc = figures.as_json()

    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}s"

    rows = [
        ("requests", str(doc["requests"])),
        ("succeeded", str(doc["succeeded"])),
        ("failed", str(doc["failed"])),
        ("peak ready on-demand / spot", f"{doc['peak_on_demand']} / {doc['peak_spot']}"),
        ("spot replicas by zone", ", ".join(f"{z} {n}" for z, n in doc["spot_zones"].items())),
        ("preempted node", doc["preempted_node"] or "-"),
        ("notice -> on-demand cover asked", s(doc["fallback_s"])),
        ("notice -> cover Ready", s(doc["cover_ready_s"])),
        ("notice -> back to the baseline", s(doc["recovered_s"])),
        ("at the end on-demand / spot", f"{doc['final_on_demand']} / {doc['final_spot']}"),
        ("TTFT p50 / p99 (client clock)", f"{s(doc['ttft_p50_s'])} / {s(doc['ttft_p99_s'])}"),
        (
            "cost now, saving against on-demand",
            "-"
            if doc["dollars_per_hour"] is None
            else f"${doc['dollars_per_hour']:.2f}/h, ${doc['saving_dollars_per_hour']:.2f}/h",
        ),
        ("wall time", s(wall_s)),
    ]
    width = max(len(name) for name, _ in rows)
    lines = ["", "Summary", "-" * (width + 24)]
    lines += [f"{name:<{width}}  {value}" for name, value in rows]
    lines.append("-" * (width + 24))
    if problems:
        lines.append("NOT OK:")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append(
            "OK: a spot node was preempted under load, on-demand covered, spot came back, "
            "and no request failed"
        )
    return "\n".join(lines)
