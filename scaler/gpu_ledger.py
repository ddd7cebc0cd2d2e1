"""The GPU ledger: GPU-seconds and dollars per target and capacity type, at one price table.

Every GPU and money figure the scaler shows comes from here: the metrics
``tidal_scaler_gpu_seconds_total{capacity_type}``,
``tidal_scaler_gpu_cost_total{capacity_type}``,
``tidal_scaler_gpu_seconds_by_state_total{state}`` (serving, starting, sleeping-only),
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
- **Devices, counted whole** (pure rule:
  :func:`~scaler.policy.placement.devices.bill_devices`): a GPU or MIG
  instance counts whole for as long as any pod is on it, however many
  time-sliced pods share it, and each pod on it is charged an even share,
  so the targets' GPU-seconds add up to the devices held. Which device a pod
  is on comes from DCGM where the warm tier reads GPU memory
  (``placements``), else from GPU feature discovery's labels on its node
  (``nodes``). A pod that asks for its own devices (no sharing) is charged
  its request, as before.
- **Serving, starting, sleeping-only.** Each device-second is counted by
  what its pods were doing (:mod:`scaler.policy.warm_tier.gpu_use`): a pod
  awake there (waking included) makes it serving; else one not Ready yet,
  starting; else every pod there sleeps (the warm tier's books,
  ``pod_use``) and it is sleeping-only, the waste the warm tier drives
  down. ``tidal_scaler_gpu_seconds_by_state_total{state}`` and
  :meth:`GpuLedger.devices` (``tidal status``'s device line) carry the split.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from scaler.kube.types import NodeInfo, PodInfo, TargetSnapshot
from scaler.metrics import Metrics
from scaler.policy.placement.availability import PodFacts
from scaler.policy.placement.cost import CostMeter, CostRate, PriceTable, cost_rate, holds_gpus
from scaler.policy.placement.devices import DeviceBill, DevicePod, bill_devices, node_devices
from scaler.policy.warm_tier.gpu_use import GpuSeconds, GpuUse, PodUse

__all__ = ["CostView", "DevicesView", "GpuLedger"]


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


@dataclass(frozen=True, slots=True)
class DevicesView:
    """The devices held now, by use, and the GPU-seconds since the scaler started."""

    held: int = 0
    serving: int = 0
    starting: int = 0
    sleeping_only: int = 0
    seconds: GpuSeconds = field(default_factory=GpuSeconds)

    def as_json(self) -> dict[str, object]:
        s = self.seconds
        return {
            "held": self.held,
            "serving": self.serving,
            "starting": self.starting,
            "sleeping_only": self.sleeping_only,
            "gpu_seconds": {
                "serving": round(s.serving, 1),
                "starting": round(s.starting, 1),
                "sleeping_only": round(s.sleeping_only, 1),
            },
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
        nodes: Callable[[], Mapping[str, NodeInfo]] | None = None,
    ) -> None:
        self.prices = prices
        self._metrics = metrics
        self._facts = facts
        self._nodes = nodes or dict
        self._meters: dict[str, CostMeter] = {}
        self._costs: dict[str, CostView] = {}
        self._devices = DevicesView()
        self._bill = DeviceBill({}, {})
        self._last: float | None = None

    def account(
        self,
        now: float,
        snapshots: Mapping[str, TargetSnapshot],
        pod_use: Callable[[str], PodUse | None] | None = None,
        wanted: Callable[[str], int | None] | None = None,
        placements: Mapping[tuple[str, str], str] | None = None,
    ) -> float:
        """Charge the interval ending at ``now``; the GPU-seconds added over every target.

        ``pod_use("namespace/pod")``: what the warm tier has a ready pod doing
        (asleep, waking; None: awake). ``wanted(target)``: the replicas the scaler
        wants, which the saving against all on-demand is measured for (``None``:
        every replica holding GPUs). ``placements``: (namespace, pod) -> device
        UUID, from DCGM. A target missing from ``snapshots`` is forgotten.
        """
        seconds = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        for gone in self._meters.keys() - snapshots.keys():
            self._meters.pop(gone)
            self._costs.pop(gone, None)
        facts = {key: self._facts(snap.pods) for key, snap in snapshots.items()}
        bill = self._bill_now(snapshots, facts, pod_use, placements or {})
        self._bill = bill
        added = 0.0
        for key, snap in snapshots.items():
            shares = {p.name: bill.shares.get(f"{p.namespace}/{p.name}", 0.0) for p in snap.pods}
            before = self._meters.get(key, CostMeter())
            want = wanted(key) if wanted is not None else None
            after = before.advance(
                facts[key], seconds=seconds, prices=self.prices, wanted=want, shares=shares
            )
            rate = cost_rate(facts[key], self.prices, wanted=want, shares=shares)
            self._meters[key] = after
            self._costs[key] = CostView(rate=rate, meter=after)
            self._metrics.account_cost(key, before=before, after=after, rate=rate)
            added += sum(after.gpu_seconds.values()) - sum(before.gpu_seconds.values())
        by_use = bill.seconds(seconds)
        self._metrics.add_gpu_seconds_by_state(by_use)
        self._devices = DevicesView(
            held=len(bill.uses),
            serving=bill.count(GpuUse.SERVING),
            starting=bill.count(GpuUse.STARTING),
            sleeping_only=bill.count(GpuUse.SLEEPING_ONLY),
            seconds=_plus(self._devices.seconds, by_use),
        )
        return added

    def _bill_now(
        self,
        snapshots: Mapping[str, TargetSnapshot],
        facts: Mapping[str, list[PodFacts]],
        pod_use: Callable[[str], PodUse | None] | None,
        placements: Mapping[tuple[str, str], str],
    ) -> DeviceBill:
        """The devices every held pod is on, and what each device is doing."""
        held: list[DevicePod] = []
        for key, snap in snapshots.items():
            for pod, fact in zip(snap.pods, facts[key], strict=True):
                if not holds_gpus(fact) or pod.node is None:
                    continue
                name = f"{pod.namespace}/{pod.name}"
                use = PodUse.STARTING if not pod.ready else PodUse.AWAKE
                if pod.ready and pod_use is not None:
                    use = pod_use(name) or PodUse.AWAKE
                device = placements.get((pod.namespace, pod.name))
                held.append(
                    DevicePod(
                        key=name,
                        node=pod.node,
                        resource=pod.gpu_resource,
                        units=fact.gpus,
                        use=use,
                        devices=(device,) if device is not None else (),
                    )
                )
        nodes = {name: node_devices(info.labels) for name, info in self._nodes().items()}
        return bill_devices(held, nodes)

    def cost(self, key: str) -> CostView | None:
        return self._costs.get(key)

    def sleeper_share(self, pods: Iterable[str]) -> float | None:
        """The share of a device the sleeping ``pods`` (namespace/pod) keep paid, at the
        last account (:meth:`DeviceBill.sleeper_share`); None: not known."""
        return self._bill.sleeper_share(pods)

    def devices(self) -> DevicesView:
        """The devices held at the last account, and the GPU-seconds by use so far."""
        return self._devices


def _plus(a: GpuSeconds, b: GpuSeconds) -> GpuSeconds:
    return GpuSeconds(
        a.serving + b.serving, a.starting + b.starting, a.sleeping_only + b.sleeping_only
    )
