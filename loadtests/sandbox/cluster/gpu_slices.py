"""Time-sliced GPUs: which physical GPU of a node a pod's slice lands on.

The NVIDIA device plugin's time-slicing (``sharing.timeSlicing.resources``
with ``replicas: N``) advertises each physical GPU as N ``nvidia.com/gpu``
units; pods that get units of one GPU share its compute and its memory, and
nothing stops one of them from taking memory the others need. GPU feature
discovery labels such a node ``nvidia.com/gpu.replicas=N`` and
``nvidia.com/gpu.memory=<MiB>``.

The sandbox's kubelet asks :class:`SliceBook` for a physical GPU when it
starts a pod that requests one, and tells each fake server its GPU's index,
UUID (``NVIDIA_VISIBLE_DEVICES``, as the device plugin does) and the memory
ledger directory it shares with the other servers on that GPU
(``sleep_mode.GpuLedger``).

Main decision: a pod goes to the physical GPU with the fewest pods on it
(lowest index on ties), as the device plugin spreads replicas; it keeps that
GPU until its worker ends, across container restarts.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GPU_MEMORY_LABEL", "GPU_REPLICAS_LABEL", "GpuSlice", "SliceBook", "requested_gpus"]

GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class GpuSlice:
    """The physical GPU a pod runs on."""

    node: str
    index: int
    uuid: str
    memory_mib: int
    ledger_dir: Path

    def server_args(self) -> tuple[str, ...]:
        return (
            "--gpu-ledger-dir",
            str(self.ledger_dir),
            "--gpu-memory-mib",
            str(self.memory_mib),
        )

    def env(self) -> dict[str, str]:
        return {"NVIDIA_VISIBLE_DEVICES": self.uuid, "TIDAL_SANDBOX_GPU_INDEX": str(self.index)}


def requested_gpus(pod: dict[str, Any]) -> int:
    """``nvidia.com/gpu`` units the pod's containers ask for (limits, else requests)."""
    total = 0
    for container in pod.get("spec", {}).get("containers") or ():
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU) or (resources.get("requests") or {}).get(
            GPU
        )
        if value is not None:
            try:
                total += int(str(value))
            except ValueError:
                continue
    return total


class SliceBook:
    """Which pod holds a slice of which physical GPU, per node."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._held: dict[str, tuple[str, int]] = {}  # pod uid -> (node, gpu index)
        self._uuids: dict[tuple[str, int], str] = {}

    def assign(self, *, uid: str, node: dict[str, Any]) -> GpuSlice | None:
        """The GPU for this pod on this node, or None when the node shares none.

        Nodes without ``nvidia.com/gpu.replicas`` above 1 are not time-sliced:
        every pod has its GPU to itself and needs no shared ledger.
        """
        labels = node.get("metadata", {}).get("labels") or {}
        name = str(node["metadata"]["name"])
        try:
            replicas = int(labels.get(GPU_REPLICAS_LABEL, "1"))
            gpus = int(labels.get("nvidia.com/gpu.count", "0"))
            memory = int(labels.get(GPU_MEMORY_LABEL, "0"))
        except ValueError:
            return None
        if replicas <= 1 or gpus < 1:
            return None
        held = self._held.get(uid)
        if held is None or held[0] != name:
            counts = [0] * gpus
            for other_node, index in self._held.values():
                if other_node == name and index < gpus:
                    counts[index] += 1
            index = min(range(gpus), key=lambda i: (counts[i], i))
            held = (name, index)
            self._held[uid] = held
        gpu_uuid = self._uuids.setdefault(held, f"GPU-{uuid.uuid4()}")
        return GpuSlice(
            node=name,
            index=held[1],
            uuid=gpu_uuid,
            memory_mib=memory,
            ledger_dir=self.directory / name / f"gpu{held[1]}",
        )

    def release(self, uid: str) -> None:
        self._held.pop(uid, None)
