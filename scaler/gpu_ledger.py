"""The GPU ledger: GPU-seconds and dollars per target and capacity type, at one price table.

Every GPU and money figure the scaler shows comes from here: the metrics
``tidal_scaler_gpu_seconds_total{capacity_type}``,
``tidal_scaler_gpu_cost_total{capacity_type}``,
``tidal_scaler_gpu_seconds_by_state_total{state}``,
``tidal_scaler_target_gpu_seconds_total{target, capacity_type}``,
``tidal_scaler_cost_dollars_total{target, capacity_type}``,
``tidal_scaler_on_demand_equivalent_dollars_total{target}``, the rates
``tidal_scaler_cost_dollars_per_hour`` and
``tidal_scaler_savings_dollars_per_hour``, and the ``cost`` of each target
in ``GET /v1/targets`` and ``tidal status`` (:class:`CostView`). The totals
without a ``target`` label are the sums of the per-target ones, by
construction: both are fed from the same increments.

Main decisions:

- **What counts is a GPU bound to a pod, Ready or not** (pure rule:
  :func:`~scaler.policy.placement.cost.holds_gpus`): from the moment a pod is bound
  to a node until it ends, its ``nvidia.com/gpu`` request is allocated to it
  and billed, loading or serving. Counting ready replicas only, as one of
  the two ledgers this one replaces did, leaves out every cold start, which
  is the very cost scale-to-zero trades against latency, and disagreed with
  the other ledger (and with the simulator, which counts a replica's GPU
  from start to end).
- **One price table** (:class:`~scaler.policy.placement.cost.PriceTable`: the
  ``placement.prices`` setting, else the flat ``prices.*_per_gpu_hour``,
  else list defaults) prices every figure.
- **Beside the loop, not inside a decision.** The service calls
  :meth:`GpuLedger.account` on its own schedule (every tick interval); no
  decision waits for it and nothing it counts feeds a decision. Each call
  charges the GPUs held *now* for the whole interval since the previous
  call (a left-closed approximation that needs no history); the first call,
  or a clock that did not advance, adds nothing.
- **Asleep or awake.** Of a target's GPU-seconds, those of the ready
  replicas the warm tier has put to sleep count as asleep (a sleeping
  replica keeps its GPU slice); the rest as awake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from scaler.kube.types import PodInfo, TargetSnapshot
from scaler.metrics import Metrics
from scaler.policy.placement.availability import PodFacts
from scaler.policy.placement.cost import CostMeter, CostRate, PriceTable, cost_rate

__all__ = ["CostView", "GpuLedger"]


@dataclass(frozen=True, slots=True)
class CostView:
    """One target's cost for ``/v1/targets`` and ``tidal status``."""

    rate: CostRate
    meter: CostMeter

    def as_json(self) -> dict[str, object]:
        return {
            "dollars_per_hour": round(self.rate.total_per_hour, 4),
            "dollars_per_hour_by_capacity": {
                c.value: round(v, 4) for c, v in self.rate.per_hour.items()
            },
            "saving_dollars_per_hour": round(self.rate.saving_per_hour, 4),
            "gpu_seconds": {c.value: round(v, 1) for c, v in self.meter.gpu_seconds.items()},
            "dollars": round(sum(self.meter.dollars.values()), 4),
            "saved_dollars": round(self.meter.saved_dollars, 4),
        }


class GpuLedger:
    """GPU-seconds and dollars of every target since the scaler started.

    ``facts`` turns a target's pods into the policy's
    :class:`~scaler.policy.placement.availability.PodFacts` (capacity type and GPU
    model from their nodes: :meth:`scaler.placement.placer.Placer.facts`).
    """

    def __init__(
        self,
        *,
        prices: PriceTable,
        metrics: Metrics,
        facts: Callable[[Iterable[PodInfo]], list[PodFacts]],
    ) -> None:
        self.prices = prices
        self._metrics = metrics
        self._facts = facts
        self._meters: dict[str, CostMeter] = {}
        self._costs: dict[str, CostView] = {}
        self._last: float | None = None

    def account(
        self,
        now: float,
        snapshots: Mapping[str, TargetSnapshot],
        asleep: Callable[[str], int] | None = None,
        wanted: Callable[[str], int | None] | None = None,
    ) -> float:
        """Charge the interval ending at ``now``; the GPU-seconds added over every target.

        ``asleep(target)``: how many of its ready replicas sleep (the warm tier).
        ``wanted(target)``: the replicas the scaler wants, which the saving
        against all on-demand is measured for (``None``: every replica holding GPUs).
        A target missing from ``snapshots`` is forgotten.
        """
        seconds = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        for gone in self._meters.keys() - snapshots.keys():
            self._meters.pop(gone)
            self._costs.pop(gone, None)
        added = sleeping = 0.0
        for key, snap in snapshots.items():
            facts = self._facts(snap.pods)
            before = self._meters.get(key, CostMeter())
            want = wanted(key) if wanted is not None else None
            after = before.advance(facts, seconds=seconds, prices=self.prices, wanted=want)
            rate = cost_rate(facts, self.prices, wanted=want)
            self._meters[key] = after
            self._costs[key] = CostView(rate=rate, meter=after)
            self._metrics.account_cost(key, before=before, after=after, rate=rate)
            held = sum(after.gpu_seconds.values()) - sum(before.gpu_seconds.values())
            added += held
            if asleep is not None and held > 0:
                dep = snap.deployment
                slept = min(asleep(key), dep.ready_replicas) * dep.gpus_per_replica * seconds
                sleeping += min(held, slept)
        self._metrics.add_gpu_seconds_by_state(awake=added - sleeping, asleep=sleeping)
        return added

    def cost(self, key: str) -> CostView | None:
        return self._costs.get(key)
