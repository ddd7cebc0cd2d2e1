"""Nodes whose GPUs the sandbox models: GPU feature discovery's labels, the plugin's resources.

A node declared with ``gpu:`` (a nodes-file key, :class:`GpuPool` in
code) looks like a node of a real GPU cluster running NVIDIA's GPU operator
with the device plugin's **mixed** MIG strategy:

- **labels** as GPU feature discovery writes them: ``nvidia.com/gpu.present``,
  ``.count``, ``.product`` (``NVIDIA-H100-80GB-HBM3``), ``.memory`` (MiB),
  ``.family``, ``.compute.major``/``.minor``, ``.mode``,
  ``.sharing-strategy``; ``nvidia.com/mig.capable``; on a MIG-capable GPU
  ``nvidia.com/mig.strategy: mixed`` and the MIG manager's
  ``nvidia.com/mig.config`` (``all-disabled`` when unpartitioned) and
  ``nvidia.com/mig.config.state: success``; and for each MIG profile on the
  node ``nvidia.com/mig-<profile>.count``, ``.memory``,
  ``.multiprocessors``, ``.slices.gi``, ``.slices.ci``, ``.product``,
  ``.replicas`` and ``.sharing-strategy``;
- **capacity and allocatable**: ``nvidia.com/gpu`` counts the GPUs that are
  not partitioned (``0`` on a partitioned node: under the mixed strategy a
  MIG-enabled GPU adds nothing to it), and each profile has its own
  resource, ``nvidia.com/mig-3g.40gb: "16"``;
- the **instance** around the GPUs (``node.kubernetes.io/instance-type``,
  ``cpu``, ``memory``) defaults to the AWS instance that carries eight of
  them (:data:`INSTANCES`), since host memory bounds how many level-1
  sleepers a node holds.

``mig:`` partitions every GPU of the node alike: a layout the GPU operator
names (``all-3g.40gb``, ``all-1g.10gb``, ``all-balanced``: the values of
``nvidia.com/mig.config``) or the devices of one GPU
(``{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}``, named ``custom``). To mix
whole and partitioned GPUs, declare two nodes. GPU figures, profiles and
layouts come from :mod:`groundwork.gpu_catalog`.

:data:`~loadtests.sandbox.cluster.node_pools.GPU_MIX_POOL`
(``tidal sandbox cluster --nodes gpu-mix``) is such a
cluster (in :mod:`~loadtests.sandbox.cluster.node_pools`): whole H100s on
demand and on spot, an H100 node cut ``all-balanced``, an A100 node cut
``all-3g.40gb``, and L4 nodes.

Main decision: a node without ``gpu:`` (the default pool, a nodes file of
``gpuProduct`` and ``gpuReplicas``) keeps the labels it always had and its
servers run at the reference GPU's speed, as before; only a declared GPU is
modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groundwork.gpu_catalog import GPU_RESOURCE, GPUS, Device, GpuModel, gpu_model

__all__ = ["INSTANCES", "GpuPool", "Instance", "MigLayout", "parse_gpu_pool"]

CUSTOM_LAYOUT = "custom"


@dataclass(frozen=True, slots=True)
class Instance:
    """A cloud machine that carries eight of one GPU (AWS names, on-demand figures)."""

    instance_type: str
    cpu: str
    memory: str
    gpus: int = 8


#: The AWS instance with eight of each GPU: p5.48xlarge (8 H100, 192 vCPU,
#: 2 TiB), p4de.24xlarge (8 A100-80GB, 96 vCPU, 1,152 GiB), p4d.24xlarge (8
#: A100-40GB, 96 vCPU, 1,152 GiB), g6e.48xlarge (8 L40S, 192 vCPU, 1,536
#: GiB), g6.48xlarge (8 L4, 192 vCPU, 768 GiB); from the EC2 instance-type
#: pages (aws.amazon.com/ec2/instance-types/p5, p4, g6e, g6).
INSTANCES: Mapping[str, Instance] = {
    "H100-80GB": Instance("p5.48xlarge", "192", "2048Gi"),
    "A100-80GB": Instance("p4de.24xlarge", "96", "1152Gi"),
    "A100-40GB": Instance("p4d.24xlarge", "96", "1152Gi"),
    "L40S": Instance("g6e.48xlarge", "192", "1536Gi"),
    "L4": Instance("g6.48xlarge", "192", "768Gi"),
}


@dataclass(frozen=True, slots=True)
class MigLayout:
    """The MIG devices on each GPU of a node, and the ``nvidia.com/mig.config`` naming them."""

    name: str
    devices: tuple[tuple[str, int], ...]  # profile name -> instances per GPU


@dataclass(frozen=True, slots=True)
class GpuPool:
    """The modelled GPUs of one node: how many, which, and how they are partitioned."""

    gpu: GpuModel
    count: int
    mig: MigLayout | None = None

    def devices(self) -> tuple[tuple[int, Device], ...]:
        """Every device the device plugin advertises, with the index of its physical GPU."""
        out: list[tuple[int, Device]] = []
        for index in range(self.count):
            if self.mig is None:
                out.append((index, Device(self.gpu)))
                continue
            for name, per_gpu in self.mig.devices:
                profile = self.gpu.profile(name)
                assert profile is not None  # checked when the layout was built
                out.extend((index, Device(self.gpu, profile)) for _ in range(per_gpu))
        return tuple(out)

    def capacity(self) -> dict[str, int]:
        """The extended resources of the node (the device plugin's, mixed strategy)."""
        resources = {GPU_RESOURCE: 0 if self.mig is not None else self.count}
        for _, dev in self.devices():
            if dev.profile is not None:
                resources[dev.resource] = resources.get(dev.resource, 0) + 1
        return resources

    def labels(self) -> dict[str, str]:
        """GPU feature discovery's labels for these GPUs (and the MIG manager's)."""
        gpu = self.gpu
        labels = {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.count": str(self.count),
            "nvidia.com/gpu.product": gpu.product,
            "nvidia.com/gpu.memory": str(gpu.memory_mib),
            "nvidia.com/gpu.family": gpu.family,
            "nvidia.com/gpu.compute.major": str(gpu.compute_capability[0]),
            "nvidia.com/gpu.compute.minor": str(gpu.compute_capability[1]),
            "nvidia.com/gpu.mode": "compute",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/mig.capable": "true" if gpu.mig_capable else "false",
        }
        if gpu.mig_capable:
            labels["nvidia.com/mig.strategy"] = "mixed"
            labels["nvidia.com/mig.config"] = self.mig.name if self.mig else "all-disabled"
            labels["nvidia.com/mig.config.state"] = "success"
        for resource, count in self.capacity().items():
            if resource == GPU_RESOURCE:
                continue
            profile = gpu.profile(resource.removeprefix("nvidia.com/mig-"))
            assert profile is not None
            prefix = resource  # nvidia.com/mig-<profile>
            labels.update(
                {
                    f"{prefix}.count": str(count),
                    f"{prefix}.memory": str(profile.memory_mib),
                    f"{prefix}.multiprocessors": str(profile.multiprocessors),
                    f"{prefix}.slices.gi": str(profile.compute_slices),
                    f"{prefix}.slices.ci": str(profile.compute_slices),
                    f"{prefix}.product": Device(gpu, profile).name,
                    f"{prefix}.replicas": "1",
                    f"{prefix}.sharing-strategy": "none",
                }
            )
        return labels


def _layout(gpu: GpuModel, value: Any) -> MigLayout:
    if isinstance(value, str):
        devices = gpu.mig_layouts.get(value.strip())
        if devices is None:
            if not gpu.mig_capable:
                raise ValueError(f"mig {value!r}: {gpu.product} has no MIG")
            names = ", ".join(sorted(gpu.mig_layouts))
            raise ValueError(
                f"mig {value!r} is not a layout of {gpu.product}; the GPU operator's: {names}, "
                "or a mapping of profile to devices per GPU"
            )
        return MigLayout(value.strip(), tuple(devices.items()))
    if isinstance(value, Mapping):
        devices = {}
        for name, count in value.items():
            if isinstance(count, bool) or not isinstance(count, int):
                raise ValueError(f"mig {dict(value)!r}: the count of {name!r} must be an integer")
            devices[str(name)] = count
        gpu.check_mig_devices(devices)
        return MigLayout(CUSTOM_LAYOUT, tuple(devices.items()))
    raise ValueError(f"mig {value!r} must be a layout name or a mapping of profile to count")


def parse_gpu_pool(gpu_name: Any, mig: Any, gpus: Any) -> tuple[GpuPool, Instance]:
    """The pool of a nodes-file entry's ``gpu``, ``mig`` and ``gpus``, and its instance defaults.

    Raises ``ValueError`` naming the value and what is allowed.
    """
    gpu = gpu_model(str(gpu_name)) if isinstance(gpu_name, str) else None
    if gpu is None:
        known = ", ".join(f"{g.name} ({g.product})" for g in GPUS)
        raise ValueError(f"gpu {gpu_name!r} is not a GPU the sandbox models; known: {known}")
    instance = INSTANCES[gpu.name]
    count = instance.gpus if gpus is None else gpus
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"gpus {count!r} must be an integer >= 1 with a gpu")
    layout = None if mig is None else _layout(gpu, mig)
    return GpuPool(gpu, count, layout), instance
