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
GPUs per pod come from its ``nvidia.com/gpu`` (or ``nvidia.com/mig-*``)
request, or, where devices are shared, from its share of the devices it is
on (``shares``: :mod:`scaler.policy.placement.devices`, each device whole,
split evenly among its pods); the price from :class:`PriceTable` by
capacity type and GPU model (the node's ``nvidia.com/gpu.product`` label),
falling back to the ``*`` entry.

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

from groundwork.gpu_catalog import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from scaler.policy.placement.availability import CapacityType, PodFacts

__all__ = [
    "ANY_MODEL",
    "DEFAULT_PRICES",
    "DEVICE_RESOURCES",
    "CostMeter",
    "CostRate",
    "PriceTable",
    "cost_rate",
    "gpu_requests",
    "gpus_requested",
    "holds_gpus",
    "on_demand_equivalent_per_hour",
]

ANY_MODEL = "*"
#: The whole-GPU resources: the device plugin's own, and its name for time-sliced
#: replicas under ``renameByDefault``.
DEVICE_RESOURCES = (GPU_RESOURCE, GPU_RESOURCE + ".shared")
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


def gpus_requested(pod_spec: Mapping[str, Any]) -> int:
    """GPU devices a pod spec asks for: its containers' ``nvidia.com/gpu`` and
    ``nvidia.com/mig-*`` (a MIG instance is a device of its own; requests default
    to limits).

    Extended resources are whole numbers; anything else is a bad spec and
    counts as 0 here rather than failing the tick (the API server refuses
    such pods anyway).
    """
    return sum(gpu_requests(pod_spec).values())


def gpu_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """The device resources a pod spec asks for, by resource (see :func:`gpus_requested`)."""
    total: dict[str, int] = {}
    for container in pod_spec.get("containers") or ():
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        for name in {*limits, *requests}:
            if name not in DEVICE_RESOURCES and not str(name).startswith(MIG_RESOURCE_PREFIX):
                continue
            value = requests.get(name, limits.get(name))
            try:
                units = max(0, int(str(value)))
            except ValueError:
                continue
            if units:
                total[name] = total.get(name, 0) + units
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


def _units(pod: PodFacts, shares: Mapping[str, float] | None) -> float:
    """The devices charged to ``pod``: its share where devices are shared, else its request."""
    if shares is None:
        return float(pod.gpus)
    return shares.get(pod.name, 0.0)


def on_demand_equivalent_per_hour(
    pods: Iterable[PodFacts],
    prices: PriceTable,
    *,
    wanted: int | None = None,
    shares: Mapping[str, float] | None = None,
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
    total = sum(_units(p, shares) * prices.price(CapacityType.ON_DEMAND, p.gpu_model) for p in held)
    if wanted is None:
        return total
    return total / len(held) * wanted if held else 0.0


def cost_rate(
    pods: Iterable[PodFacts],
    prices: PriceTable,
    *,
    wanted: int | None = None,
    shares: Mapping[str, float] | None = None,
) -> CostRate:
    """Dollars per hour now; the saving against all on demand for ``wanted`` replicas
    (:func:`on_demand_equivalent_per_hour`); ``shares``: the devices charged to each
    pod by name where devices are shared (else each pod's request)."""
    pods = list(pods)
    per_hour = dict.fromkeys(CapacityType, 0.0)
    for pod in pods:
        if holds_gpus(pod):
            price = prices.price(pod.capacity_type, pod.gpu_model)
            per_hour[pod.capacity_type] += _units(pod, shares) * price
    equivalent = on_demand_equivalent_per_hour(pods, prices, wanted=wanted, shares=shares)
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
        shares: Mapping[str, float] | None = None,
    ) -> CostMeter:
        """The totals after ``seconds`` more with ``pods`` as they are now (the
        on-demand equivalent for ``wanted`` replicas: :func:`on_demand_equivalent_per_hour`;
        ``shares`` as for :func:`cost_rate`)."""
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        pods = list(pods)
        gpu_seconds = dict(self.gpu_seconds)
        dollars = dict(self.dollars)
        equivalent = self.on_demand_equivalent_dollars + (
            on_demand_equivalent_per_hour(pods, prices, wanted=wanted, shares=shares)
            * seconds
            / 3600
        )
        for pod in pods:
            if not holds_gpus(pod):
                continue
            used = _units(pod, shares) * seconds
            gpu_seconds[pod.capacity_type] += used
            dollars[pod.capacity_type] += (
                used / 3600 * prices.price(pod.capacity_type, pod.gpu_model)
            )
        return CostMeter(
            gpu_seconds=gpu_seconds, dollars=dollars, on_demand_equivalent_dollars=equivalent
        )
