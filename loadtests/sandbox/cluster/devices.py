"""The devices each pod's fake server is given, and the memory it shares with its node.

This is the device plugin's part of the sandbox's kubelet. For a fake
vLLM on a node of the pool (:meth:`DeviceBook.add_nodes`):

- **a modelled GPU** (a node declared with ``gpu:``, see
  :mod:`~loadtests.sandbox.cluster.gpu_nodes`): the pod's request for
  ``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>`` (limits, else
  requests) gets that many free devices of that kind, the lowest GPU index
  first, each with a UUID as ``nvidia-smi -L`` names them (``GPU-...`` for
  a whole GPU, ``MIG-...`` for an instance). The server hears of them as a
  real one would: ``NVIDIA_VISIBLE_DEVICES`` holds the UUIDs (the device
  plugin's default ``envvar`` strategy with UUIDs), and the flags
  ``--gpu-shape <device> --gpu-count N --gpu-memory-mib M`` (M: the
  devices' framebuffers together) say what a
  real process learns by asking the driver about them (the device's name
  is GPU feature discovery's: ``NVIDIA-L4``,
  ``NVIDIA-H100-80GB-HBM3-MIG-3g.40gb``). ``TIDAL_SANDBOX_GPU_INDEX`` names
  the physical GPU of the first device, for the DCGM-like exporter;
- **a time-sliced GPU** (``nvidia.com/gpu.replicas`` above 1): a slice of
  one physical GPU and its shared memory ledger, as
  :mod:`~loadtests.sandbox.cluster.gpu_slices` has always done;
- **host memory**, on every node: ``--host-ledger-dir`` (one directory per
  node, shared by its servers) and ``--host-memory-mib`` (the node's
  ``memory`` capacity), the ledger a level-1 sleep takes its weights' room
  from (``loadtests.sandbox.servers.sleep_mode``).

Main decisions:

- A pod keeps its devices until its worker ends, across container
  restarts, as the kubelet's device manager keeps an allocation.
- A pod the scheduler placed but whose devices are taken (the two disagree
  only if a pod was bound by hand) raises :class:`NoFreeDevice`, which the
  kubelet shows as ``CreateContainerConfigError`` and retries; a real
  kubelet fails such a pod with ``UnexpectedAdmissionError``.
- The fake server models one kind of device: a pod asking for two kinds
  is refused the same way, naming both.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundwork.gpu_catalog import GPU_RESOURCE, MIG_RESOURCE_PREFIX, Device
from loadtests.sandbox.cluster.controllers.scheduler import pod_requests
from loadtests.sandbox.cluster.gpu_nodes import GpuPool
from loadtests.sandbox.cluster.gpu_slices import SliceBook, requested_gpus
from loadtests.sandbox.cluster.nodes import NodeSpec
from loadtests.sandbox.cluster.quantity import parse_quantity

__all__ = ["DeviceBook", "NoFreeDevice", "PodDevices"]

Obj = dict[str, Any]
MIB = 1024 * 1024


class NoFreeDevice(Exception):
    """The pod's devices cannot be given; the message says which and why."""


@dataclass(frozen=True, slots=True)
class PodDevices:
    """What the kubelet adds to a fake server's command line and environment."""

    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Slot:
    index: int  # the physical GPU
    device: Device
    uuid: str
    holder: str | None = None  # pod uid


@dataclass(slots=True)
class _Node:
    host_memory_mib: int
    slots: list[_Slot]


def _wanted(pod: Obj) -> dict[str, int]:
    """The GPU devices a pod asks for: resource -> count (whole numbers, as the API insists)."""
    try:
        requests = pod_requests(pod)
    except ValueError:
        return {}
    return {
        name: int(value)
        for name, value in requests.items()
        if (name == GPU_RESOURCE or name.startswith(MIG_RESOURCE_PREFIX)) and value >= 1
    }


def _slots(pool: GpuPool) -> list[_Slot]:
    slots = []
    for index, dev in pool.devices():
        prefix = "GPU" if dev.profile is None else "MIG"
        slots.append(_Slot(index, dev, f"{prefix}-{uuid.uuid4()}"))
    return slots


class DeviceBook:
    """Which pod holds which device of which node, and each node's host memory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.slices = SliceBook(directory)
        self._nodes: dict[str, _Node] = {}

    def add_nodes(self, specs: Sequence[NodeSpec]) -> None:
        """Know these nodes' devices and host memory (again after a node comes back: no-op)."""
        for spec in specs:
            if spec.name in self._nodes:
                continue
            memory = int(parse_quantity(spec.memory) // MIB)
            pool = spec.gpu_pool
            self._nodes[spec.name] = _Node(memory, _slots(pool) if pool is not None else [])

    def assign(self, *, uid: str, pod: Obj, node: Obj) -> PodDevices:
        """The devices and ledgers of pod ``uid`` on ``node`` (the same ones again on a restart)."""
        name = str(node["metadata"]["name"])
        known = self._nodes.get(name)
        args: list[str] = []
        env: dict[str, str] = {}
        if known is not None and known.slots:
            self._take(known, name, uid, _wanted(pod), args, env)
        elif requested_gpus(pod) >= 1:
            shared = self.slices.assign(uid=uid, node=node)
            if shared is not None:
                shared.ledger_dir.mkdir(parents=True, exist_ok=True)
                args.extend(shared.server_args())
                env.update(shared.env())
        if known is not None:
            ledger = self.directory / "hosts" / name
            ledger.mkdir(parents=True, exist_ok=True)
            args += [
                "--host-ledger-dir",
                str(ledger),
                "--host-memory-mib",
                str(known.host_memory_mib),
            ]
        return PodDevices(tuple(args), env)

    def _take(
        self,
        node: _Node,
        name: str,
        uid: str,
        wanted: dict[str, int],
        args: list[str],
        env: dict[str, str],
    ) -> None:
        if not wanted:
            return
        if len(wanted) > 1:
            raise NoFreeDevice(
                f"the fake model server runs on one kind of GPU device; the pod asks for "
                f"{', '.join(sorted(wanted))}"
            )
        ((resource, count),) = wanted.items()
        held = [s for s in node.slots if s.holder == uid and s.device.resource == resource]
        free = [s for s in node.slots if s.holder is None and s.device.resource == resource]
        if len(held) < count:
            if len(held) + len(free) < count:
                raise NoFreeDevice(
                    f"node {name} has {len(free)} free {resource} device(s); the pod asks for "
                    f"{count} (it was bound where they are taken)"
                )
            for slot in free[: count - len(held)]:
                slot.holder = uid
                held.append(slot)
        held.sort(key=lambda s: (s.index, s.uuid))
        first = held[0]
        args += [
            "--gpu-shape",
            first.device.name,
            "--gpu-count",
            str(count),
            "--gpu-memory-mib",
            str(first.device.memory_mib * count),
        ]
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(s.uuid for s in held)
        env["TIDAL_SANDBOX_GPU_INDEX"] = str(first.index)

    def holders(self, node: str) -> dict[str, list[str]]:
        """Pod uid -> the UUIDs of the devices it holds on ``node``."""
        out: dict[str, list[str]] = {}
        for slot in self._nodes[node].slots if node in self._nodes else ():
            if slot.holder is not None:
                out.setdefault(slot.holder, []).append(slot.uuid)
        return out

    def release(self, uid: str) -> None:
        self.slices.release(uid)
        for node in self._nodes.values():
            for slot in node.slots:
                if slot.holder == uid:
                    slot.holder = None
