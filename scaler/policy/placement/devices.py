"""Which devices the pods hold, each counted whole however many pods share it (pure).

A cloud bills a GPU, or a MIG slice, for as long as anything holds it; the
NVIDIA device plugin's time-slicing lets several pods hold one GPU, each
asking for one ``nvidia.com/gpu`` *replica* of it. Counting a pod's request
as a GPU counts a time-sliced GPU once per pod on it (four pods sharing one
GPU read as four GPU-hours an hour), which hides what sharing saves and
what a GPU of sleepers alone wastes. So the GPU ledger counts *devices*:

- a device is a whole GPU (``nvidia.com/gpu``) or a MIG instance
  (``nvidia.com/mig-<profile>``), told apart by its UUID where DCGM says which
  pod is on which (``DCGM_FI_DEV_FB_USED`` by pod and UUID, the warm tier's
  GPU memory); without that, by what GPU feature discovery says of the node:
  ``nvidia.com/gpu.count`` (``nvidia.com/mig-<profile>.count``) devices and
  ``nvidia.com/gpu.replicas`` (``.replicas``) replicas of each. A resource
  that is not shared gives each unit its own device; a shared one is spread
  over the node's devices one pod after another, as the device plugin's
  default (``distributed``) allocation spreads replicas;
- each device's cost is split evenly among the pods on it, so the targets'
  shares add up to the devices held (:attr:`DeviceBill.shares`);
- each device's use is its pods' (:func:`scaler.policy.warm_tier.gpu_use`):
  serving, starting or sleeping-only.

Main decision: without DCGM the spread is an estimate. The device plugin
does not say which replica went where; a node's pods are taken to be spread
evenly, which the default allocation does, and which a cluster set to pack
replicas (``packed``) would not. With DCGM the devices are the ones measured.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from groundwork.gpu_catalog import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from scaler.policy.warm_tier.gpu_use import GpuSeconds, GpuUse, PodUse, gpu_use

__all__ = ["DeviceBill", "DevicePod", "NodeDevices", "bill_devices", "node_devices"]


@dataclass(frozen=True, slots=True)
class DevicePod:
    """A pod that holds device units on a node, and what it is doing."""

    key: str  # namespace/pod
    node: str
    resource: str  # nvidia.com/gpu (or .shared) or nvidia.com/mig-<profile>
    units: int
    use: PodUse
    devices: tuple[str, ...] = ()  # device UUIDs DCGM places it on (empty: unknown)


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """A node's devices per resource, and how many replicas the device plugin makes of each."""

    count: Mapping[str, int]
    replicas: Mapping[str, int]


def node_devices(labels: Mapping[str, str]) -> NodeDevices:
    """What GPU feature discovery's labels say of a node's devices (unknown: empty)."""
    count: dict[str, int] = {}
    replicas: dict[str, int] = {}
    migs = {k.rsplit(".", 1)[0] for k in labels if k.startswith(MIG_RESOURCE_PREFIX)}
    prefixes = [GPU_RESOURCE, *sorted(migs)]
    for resource in prefixes:
        n = _whole(labels.get(f"{resource}.count"))
        if n is not None:
            count[resource] = n
            replicas[resource] = max(1, _whole(labels.get(f"{resource}.replicas")) or 1)
    return NodeDevices(count, replicas)


def _whole(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class DeviceBill:
    """Each held device's use, and each pod's share of the devices (the shares add up
    to the devices held)."""

    uses: Mapping[str, GpuUse]
    shares: Mapping[str, float]
    holders: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # device -> pods

    def sleeper_share(self, keys: Iterable[str]) -> float | None:
        """The share of a device the pods ``keys`` keep paid while they sleep, on
        average: nothing on a device that serves (paid for anyway), their even
        share of one that holds only sleepers; None when none of them is held."""
        shares = []
        for key in keys:
            for device, pods in self.holders.items():
                if key in pods:
                    serving = self.uses.get(device) is GpuUse.SERVING
                    shares.append(0.0 if serving else 1.0 / len(pods))
        return sum(shares) / len(shares) if shares else None

    def seconds(self, seconds: float) -> GpuSeconds:
        """``seconds`` of every held device, by its use."""
        out = GpuSeconds()
        for use in self.uses.values():
            out = out.add(use, seconds)
        return out

    def count(self, use: GpuUse) -> int:
        return sum(1 for u in self.uses.values() if u is use)


def bill_devices(pods: Iterable[DevicePod], nodes: Mapping[str, NodeDevices]) -> DeviceBill:
    """Which device each pod's units are on, and so each device's use and pods' shares
    (module docstring)."""
    on: dict[str, list[DevicePod]] = defaultdict(list)
    unplaced: dict[tuple[str, str], list[DevicePod]] = defaultdict(list)
    for pod in sorted(pods, key=lambda p: p.key):
        if pod.devices:
            for device in pod.devices:
                on[device].append(pod)
        else:
            unplaced[(pod.node, pod.resource)].append(pod)
    for (node, resource), group in unplaced.items():
        known = nodes.get(node)
        labelled = resource.removesuffix(".shared")  # renamed replicas: the GPU's labels
        count = known.count.get(labelled) if known is not None else None
        shared = known is not None and known.replicas.get(labelled, 1) > 1
        if not shared or count is None:
            for pod in group:
                for unit in range(pod.units):
                    on[f"{node}/{resource}/{pod.key}#{unit}"].append(pod)
            continue
        spread = max(1, min(count, sum(p.units for p in group)))
        slot = 0
        for pod in group:
            for _ in range(pod.units):
                on[f"{node}/{resource}#{slot % spread}"].append(pod)
                slot += 1
    uses: dict[str, GpuUse] = {}
    shares: dict[str, float] = defaultdict(float)
    for device, holders in on.items():
        use = gpu_use(p.use for p in holders)
        if use is None:
            continue
        uses[device] = use
        for pod in holders:
            shares[pod.key] += 1.0 / len(holders)
    held = {device: tuple(p.key for p in on[device]) for device in uses}
    return DeviceBill(uses, dict(shares), held)
