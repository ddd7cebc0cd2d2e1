"""GPU-seconds and money by capacity type, and what spot saved against all on-demand.

Pure bookkeeping with time passed in. Each tick the controller hands
:meth:`CostMeter.advance` the replicas of a target (:class:`PodFacts`, with
the GPUs each requests and the GPU model of its node) and the seconds since
the last tick; the meter adds GPU-seconds and dollars per capacity type and
what the same GPU-seconds would have cost on demand. :func:`cost_rate` is
the same at one instant, in dollars per hour. The saving is measured
against all on demand for the replicas the scaler *wants*, not for every
replica that holds a GPU: while on-demand cover stands in for a spot replica
that is still starting, both hold GPUs, but only one is wanted.

What counts: a replica holds its GPUs from the moment it is bound to a node
until it ends, Ready or not (a cloud bills a loading model's GPU too).
GPUs per pod come from its ``nvidia.com/gpu`` request; the price from
:class:`PriceTable` by capacity type and GPU model (the node's
``nvidia.com/gpu.product`` label), falling back to the ``*`` entry.

Default prices (:data:`DEFAULT_PRICES`, dollars per GPU-hour) are list
prices and an assumption, stated so they can be replaced with your own
(scaler setting ``placement.prices``):

- on-demand, from AWS EC2 On-Demand list prices in us-east-1 divided by
  the instance's GPUs: p4d.24xlarge $32.7726/h for 8 A100-SXM4-40GB
  (https://aws.amazon.com/ec2/instance-types/p4/) -> $4.10; p5.48xlarge
  $98.32/h for 8 H100-80GB (https://aws.amazon.com/ec2/instance-types/p5/,
  the price before AWS's June 2025 P5 cut) -> $12.29; g6.xlarge $0.8048/h
  for 1 L4 (https://aws.amazon.com/ec2/instance-types/g6/) -> $0.80;
- spot at 30% of on-demand: spot prices move daily; Google states 60-91%
  off (https://cloud.google.com/spot-vms/pricing) and AWS up to 90% off
  (https://aws.amazon.com/ec2/spot/pricing/); 70% off sits inside both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaler.policy.placement.availability import CapacityType, PodFacts

__all__ = [
    "ANY_MODEL",
    "DEFAULT_PRICES",
    "CostMeter",
    "CostRate",
    "PriceTable",
    "cost_rate",
    "gpus_requested",
    "holds_gpus",
    "on_demand_equivalent_per_hour",
]

ANY_MODEL = "*"
_SPOT_SHARE = 0.30  # spot at 30% of on-demand: see the module docstring

_ON_DEMAND_LIST = {
    "NVIDIA-A100-SXM4-40GB": 4.10,
    "NVIDIA-H100-80GB-HBM3": 12.29,
    "NVIDIA-L4": 0.80,
    ANY_MODEL: 4.10,
}


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Dollars per GPU-hour by capacity type, then GPU model (``*``: any other model)."""

    per_gpu_hour: Mapping[CapacityType, Mapping[str, float]]

    def __post_init__(self) -> None:
        for capacity in CapacityType:
            models = self.per_gpu_hour.get(capacity)
            if not models or ANY_MODEL not in models:
                raise ValueError(
                    f"prices for {capacity.value} need a '{ANY_MODEL}' entry "
                    "(the price of any GPU model not listed)"
                )
            for model, price in models.items():
                if not price >= 0:
                    raise ValueError(
                        f"price of {model} on {capacity.value} must be >= 0 $/GPU-hour, got {price}"
                    )

    def price(self, capacity: CapacityType, model: str | None) -> float:
        models = self.per_gpu_hour[capacity]
        return models.get(model or ANY_MODEL, models[ANY_MODEL])


DEFAULT_PRICES = PriceTable(
    per_gpu_hour={
        CapacityType.ON_DEMAND: dict(_ON_DEMAND_LIST),
        CapacityType.SPOT: {m: round(p * _SPOT_SHARE, 4) for m, p in _ON_DEMAND_LIST.items()},
    }
)


GPU_RESOURCE = "nvidia.com/gpu"


def gpus_requested(pod_spec: Mapping[str, Any]) -> int:
    """GPUs a pod spec asks for: its containers' ``nvidia.com/gpu`` (requests default to limits).

    Extended resources are whole numbers; anything else is a bad spec and
    counts as 0 here rather than failing the tick (the API server refuses
    such pods anyway).
    """
    total = 0
    for container in pod_spec.get("containers") or ():
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(GPU_RESOURCE)
        if value is None:
            value = (resources.get("limits") or {}).get(GPU_RESOURCE)
        try:
            total += max(0, int(str(value))) if value is not None else 0
        except ValueError:
            continue
    return total


def holds_gpus(pod: PodFacts) -> bool:
    """Bound to a node and not finished: its GPUs are allocated (and billed)."""
    return pod.node is not None and pod.phase not in ("Succeeded", "Failed") and pod.gpus > 0


@dataclass(frozen=True, slots=True)
class CostRate:
    """Dollars per hour now, by capacity type, and what the same GPUs cost all on demand."""

    per_hour: Mapping[CapacityType, float]
    on_demand_equivalent_per_hour: float

    @property
    def total_per_hour(self) -> float:
        return sum(self.per_hour.values())

    @property
    def saving_per_hour(self) -> float:
        return self.on_demand_equivalent_per_hour - self.total_per_hour


def on_demand_equivalent_per_hour(
    pods: Iterable[PodFacts], prices: PriceTable, *, wanted: int | None = None
) -> float:
    """What the model would cost per hour all on demand.

    ``wanted`` (the replicas the scaler wants): that many replicas, each at
    the on-demand price of the GPUs an average replica of ``pods`` holds. A
    spot replica still starting beside the on-demand cover that replaces it
    is not wanted twice, so the saving during a cover is not inflated (it may
    be negative: the cover costs more than all on demand would). ``None``:
    the GPUs ``pods`` hold, each at its on-demand price.
    """
    held = [p for p in pods if holds_gpus(p)]
    total = sum(p.gpus * prices.price(CapacityType.ON_DEMAND, p.gpu_model) for p in held)
    if wanted is None:
        return total
    return total / len(held) * wanted if held else 0.0


def cost_rate(
    pods: Iterable[PodFacts], prices: PriceTable, *, wanted: int | None = None
) -> CostRate:
    """Dollars per hour now; the saving against all on demand for ``wanted`` replicas
    (:func:`on_demand_equivalent_per_hour`)."""
    pods = list(pods)
    per_hour = dict.fromkeys(CapacityType, 0.0)
    for pod in pods:
        if holds_gpus(pod):
            per_hour[pod.capacity_type] += pod.gpus * prices.price(pod.capacity_type, pod.gpu_model)
    equivalent = on_demand_equivalent_per_hour(pods, prices, wanted=wanted)
    return CostRate(per_hour=per_hour, on_demand_equivalent_per_hour=equivalent)


def _zeros() -> dict[CapacityType, float]:
    return dict.fromkeys(CapacityType, 0.0)


@dataclass(frozen=True, slots=True)
class CostMeter:
    """Running totals for one target since the scaler started (start with ``CostMeter()``)."""

    gpu_seconds: Mapping[CapacityType, float] = field(default_factory=_zeros)
    dollars: Mapping[CapacityType, float] = field(default_factory=_zeros)
    on_demand_equivalent_dollars: float = 0.0

    @property
    def saved_dollars(self) -> float:
        return self.on_demand_equivalent_dollars - sum(self.dollars.values())

    def advance(
        self,
        pods: Iterable[PodFacts],
        *,
        seconds: float,
        prices: PriceTable,
        wanted: int | None = None,
    ) -> CostMeter:
        """The totals after ``seconds`` more with ``pods`` as they are now (the
        on-demand equivalent for ``wanted`` replicas: :func:`on_demand_equivalent_per_hour`)."""
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        pods = list(pods)
        gpu_seconds = dict(self.gpu_seconds)
        dollars = dict(self.dollars)
        equivalent = self.on_demand_equivalent_dollars + (
            on_demand_equivalent_per_hour(pods, prices, wanted=wanted) * seconds / 3600
        )
        for pod in pods:
            if not holds_gpus(pod):
                continue
            used = pod.gpus * seconds
            gpu_seconds[pod.capacity_type] += used
            dollars[pod.capacity_type] += (
                used / 3600 * prices.price(pod.capacity_type, pod.gpu_model)
            )
        return CostMeter(
            gpu_seconds=gpu_seconds, dollars=dollars, on_demand_equivalent_dollars=equivalent
        )
