"""The sandbox's nodes: the default GPU pool, nodes files, and spot preemption.

**Default pool**: 2 on-demand and 4 spot nodes with 8 ``nvidia.com/gpu``
each, across two zones (``us-east-1a``/``us-east-1b``). Every node carries
the labels the providers' node selectors use, so a scaler configured for any
provider (docs/placement.md) finds its capacity type: Karpenter's
``karpenter.sh/capacity-type`` (``spot``/``on-demand``), EKS's
``eks.amazonaws.com/capacityType`` (``SPOT``/``ON_DEMAND``), and on spot
nodes GKE's ``cloud.google.com/gke-spot: "true"`` and AKS's
``kubernetes.azure.com/scalesetpriority: spot``; plus the well-known
``topology.kubernetes.io/zone``/``region``, ``kubernetes.io/hostname``,
``node.kubernetes.io/instance-type``, ``nvidia.com/gpu.product`` and
``nvidia.com/gpu.memory``; a time-sliced node (``gpuReplicas`` > 1) also
``nvidia.com/gpu.replicas`` and advertises GPUs x replicas units, as GPU
feature discovery and the device plugin do (see ``gpu_slices``).
The default spot nodes carry no taint, as Karpenter's; GKE and AKS taint
theirs (``cloud.google.com/gke-spot=true:NoSchedule``,
``kubernetes.azure.com/scalesetpriority=spot:NoSchedule``), which a nodes
file can ask for.

**Nodes file** (YAML or JSON)::

    nodes:
      - name: spot-a          # with count > 1: spot-a-1, spot-a-2, ...
        count: 2
        capacityType: spot    # or on-demand
        zone: us-east-1a
        gpus: 8
        cpu: "96"             # optional; memory, pods, instanceType, gpuProduct too
        gpuReplicas: 4        # optional, time-slicing: each GPU is 4 nvidia.com/gpu units
        gpuMemoryMiB: 40960   # optional: one GPU's framebuffer, shared by its units
        labels: {team: ml}
        taints: [{key: cloud.google.com/gke-spot, value: "true", effect: NoSchedule}]
      - name: h100-mig        # a modelled GPU (gpu_nodes): GPU feature discovery's
        gpu: H100-80GB        # labels, MIG resources (mixed strategy), the instance's
        mig: all-balanced     # cpu and memory; its servers run at that GPU's speed

``gpu`` takes the catalog's GPUs (``H100-80GB``, ``A100-80GB``,
``A100-40GB``, ``L40S``, ``L4``, or their products) and excludes
``gpuProduct``, ``gpuMemoryMiB`` and ``gpuReplicas``; see
:mod:`~loadtests.sandbox.cluster.gpu_nodes`.

**Preemption** (:meth:`NodeLifecycle.preempt`), as a cloud and its
termination handler do it to a spot node: the node is cordoned
(``spec.unschedulable`` and the ``node.kubernetes.io/unschedulable`` taint)
and tainted as interrupted with every provider's notice key, as the nodes
carry every provider's labels (:data:`INTERRUPTION_TAINTS`, from the
scaler's provider presets: Karpenter's ``karpenter.sh/disrupted``, GKE's
``cloud.google.com/impending-node-termination``, the AWS Node Termination
Handler's ``aws-node-termination-handler/*``, all ``NoSchedule``), with
a ``SpotInterruption`` Warning event; after the notice its pods are deleted
with their own grace periods (the kubelet SIGTERMs them and waits), then the
node is deleted. Any pod still bound to a node that no longer exists is
force-deleted, as the pod garbage collector does.

**Spot capacity coming back**: with ``return_after_s`` the preempted node
registers again (same name, address and labels, a fresh boot) that long
after it went, as an autoscaler gets a spot machine back once the market
has one; :meth:`NodeLifecycle.restore` does it at once. How much spot the
cloud gives out in all is the scheduler's
(:meth:`~loadtests.sandbox.cluster.controllers.scheduler.Scheduler.set_spot_capacity`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadtests.sandbox.cluster.controllers.base import (
    NODES,
    PODS,
    Cache,
    EventRecorder,
    Obj,
)
from loadtests.sandbox.cluster.errors import AlreadyExists, NotFound
from loadtests.sandbox.cluster.gpu_nodes import GpuPool, parse_gpu_pool
from loadtests.sandbox.cluster.quantity import canonical_quantity, parse_quantity
from loadtests.sandbox.cluster.store import Store, rfc3339
from scaler.policy.placement.providers import PRESETS

__all__ = [
    "DEFAULT_POOL",
    "INTERRUPTION_TAINTS",
    "NodeLifecycle",
    "NodeSpec",
    "PreemptionResult",
    "load_nodes_file",
    "node_object",
    "parse_nodes",
]

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# Every provider preset's notice keys, the two handlers' spot keys first.
INTERRUPTION_TAINTS = tuple(
    dict.fromkeys(
        (
            "aws-node-termination-handler/spot-itn",
            "cloud.google.com/impending-node-termination",
            *(key for p in PRESETS.values() for key in p.notice_taints),
        )
    )
)
CAPACITY_TYPES = ("spot", "on-demand")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    capacity_type: str
    zone: str
    gpus: int = 8
    cpu: str = "96"
    memory: str = "1152Gi"
    pods: int = 110
    instance_type: str = "p4d.24xlarge"
    gpu_product: str = "NVIDIA-A100-SXM4-40GB"
    # Time-slicing: each physical GPU is advertised as this many nvidia.com/gpu
    # units sharing one framebuffer of gpu_memory_mib (the device plugin's
    # sharing.timeSlicing replicas).
    gpu_replicas: int = 1
    gpu_memory_mib: int = 40_960
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    # A modelled GPU (gpu_nodes): its labels and resources replace the
    # gpu_product/gpu_memory_mib/gpu_replicas ones, and gpus is its count.
    gpu_pool: GpuPool | None = None


def _default_pool() -> tuple[NodeSpec, ...]:
    return (
        NodeSpec("gpu-on-demand-1", "on-demand", "us-east-1a"),
        NodeSpec("gpu-on-demand-2", "on-demand", "us-east-1b"),
        NodeSpec("gpu-spot-1", "spot", "us-east-1a"),
        NodeSpec("gpu-spot-2", "spot", "us-east-1a"),
        NodeSpec("gpu-spot-3", "spot", "us-east-1b"),
        NodeSpec("gpu-spot-4", "spot", "us-east-1b"),
    )


DEFAULT_POOL = _default_pool()


def _labels(spec: NodeSpec) -> dict[str, str]:
    spot = spec.capacity_type == "spot"
    region = spec.zone[:-1] if spec.zone[-1:].isalpha() else spec.zone
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": spec.instance_type,
        ZONE: spec.zone,
        REGION: region,
        CAPACITY_TYPE: spec.capacity_type,
        "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
    }
    if spec.gpu_pool is not None:
        labels.update(spec.gpu_pool.labels())
    else:
        labels["nvidia.com/gpu.present"] = "true" if spec.gpus else "false"
        labels["nvidia.com/gpu.count"] = str(spec.gpus)
        labels["nvidia.com/gpu.product"] = spec.gpu_product
        labels["nvidia.com/gpu.memory"] = str(spec.gpu_memory_mib)
    if spec.gpu_replicas > 1:
        labels["nvidia.com/gpu.replicas"] = str(spec.gpu_replicas)
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    if spot:
        labels["cloud.google.com/gke-spot"] = "true"
        labels["kubernetes.azure.com/scalesetpriority"] = "spot"
    labels.update(spec.labels)
    return labels


def node_object(
    spec: NodeSpec, *, address: str, kubelet_version: str = "v1.32.2", now: str = ""
) -> Obj:
    """The Node as a kubelet registers it, Ready, with GPU capacity."""
    # Canonical quantities, as a real kubelet's Node reads back ("1k", not "1000").
    capacity = {
        "cpu": canonical_quantity(spec.cpu),
        "memory": canonical_quantity(spec.memory),
        "pods": canonical_quantity(spec.pods),
        "ephemeral-storage": "500Gi",
        "nvidia.com/gpu": canonical_quantity(spec.gpus * spec.gpu_replicas),
    }
    if spec.gpu_pool is not None:
        capacity.update(
            {name: canonical_quantity(n) for name, n in spec.gpu_pool.capacity().items()}
        )
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    pressure = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for kind, reason, message in (
            (
                "MemoryPressure",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    node: Obj = {
        "metadata": {"name": spec.name, "labels": _labels(spec)},
        "spec": {"providerID": f"sandbox:///{spec.zone}/{spec.name}"},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [*pressure, condition],
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": spec.name},
            ],
            "nodeInfo": {
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "containerRuntimeVersion": "containerd://1.7.22",
                "osImage": "Tidal sandbox",
                "kernelVersion": "6.1.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "phase": "Running",
        },
    }
    if spec.taints:
        node["spec"]["taints"] = [dict(t) for t in spec.taints]
    return node


def _fail(where: str, problem: str) -> ValueError:
    return ValueError(f"nodes file: {where}: {problem}")


_ALLOWED_KEYS = frozenset(
    {
        "name",
        "count",
        "capacityType",
        "zone",
        "gpus",
        "cpu",
        "memory",
        "pods",
        "instanceType",
        "gpuProduct",
        "gpuReplicas",
        "gpuMemoryMiB",
        "gpu",
        "mig",
        "labels",
        "taints",
    }
)
# Keys a modelled GPU (``gpu``) sets itself.
_LEGACY_GPU_KEYS = ("gpuProduct", "gpuMemoryMiB", "gpuReplicas")


def _int_key(entry: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        allowed = f"{low}..{high}" if high < 2**31 else f">= {low}"
        raise ValueError(f"{key} {value!r} must be an integer {allowed}")
    return value


def _taints(entry: Mapping[str, Any]) -> tuple[Mapping[str, str], ...]:
    taints = []
    for t in entry.get("taints") or ():
        if not isinstance(t, Mapping) or "key" not in t:
            raise ValueError(f"taint {t!r} needs at least a 'key'")
        effect = t.get("effect", "NoSchedule")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError(
                f"taint effect {effect!r} is not NoSchedule, PreferNoSchedule or NoExecute"
            )
        taint = {"key": str(t["key"]), "effect": effect}
        if t.get("value") is not None:
            taint["value"] = str(t["value"])
        taints.append(taint)
    return tuple(taints)


def _gpu_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The NodeSpec fields about GPUs: a modelled pool (``gpu``) or the legacy keys."""
    if "gpu" not in entry:
        if "mig" in entry:
            raise ValueError("mig needs gpu (the GPU it partitions)")
        gpu_memory = _int_key(entry, "gpuMemoryMiB", 40_960, 1, 2**31)
        return {
            "gpus": _int_key(entry, "gpus", 8, 0, 2**31),
            "gpu_product": str(entry.get("gpuProduct", "NVIDIA-A100-SXM4-40GB")),
            "gpu_replicas": _int_key(entry, "gpuReplicas", 1, 1, 64),
            "gpu_memory_mib": gpu_memory,
        }
    clashing = [key for key in _LEGACY_GPU_KEYS if key in entry]
    if clashing:
        raise ValueError(f"gpu sets the GPU's product, memory and sharing; drop {clashing}")
    pool, instance = parse_gpu_pool(entry["gpu"], entry.get("mig"), entry.get("gpus"))
    return {
        "gpus": pool.count,
        "gpu_pool": pool,
        "gpu_product": pool.gpu.product,
        "gpu_memory_mib": pool.gpu.memory_mib,
        "instance_type": instance.instance_type,
        "cpu": instance.cpu,
        "memory": instance.memory,
    }


def _entry_specs(entry: Mapping[str, Any]) -> list[NodeSpec]:
    """The node specs of one nodes-file entry; ``ValueError`` names what is wrong."""
    unknown = set(entry) - _ALLOWED_KEYS
    if unknown:
        raise ValueError(f"unknown key(s) {sorted(unknown)}; allowed: {sorted(_ALLOWED_KEYS)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("'name' is required")
    capacity_type = entry.get("capacityType", "on-demand")
    if capacity_type not in CAPACITY_TYPES:
        raise ValueError(f"capacityType {capacity_type!r} is not one of {CAPACITY_TYPES}")
    count = entry.get("count", 1)
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count {count!r} must be an integer >= 1")
    fields = _gpu_fields(entry)
    for key in ("cpu", "memory"):
        if key in entry:
            parse_quantity(str(entry[key]))
            fields[key] = str(entry[key])
    if "instanceType" in entry:
        fields["instance_type"] = str(entry["instanceType"])
    labels = entry.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise ValueError("labels must be a mapping")
    names = [name] if count == 1 else [f"{name}-{n}" for n in range(1, count + 1)]
    return [
        NodeSpec(
            name=node_name,
            capacity_type=capacity_type,
            zone=str(entry.get("zone", "us-east-1a")),
            pods=int(entry.get("pods", 110)),
            labels={str(k): str(v) for k, v in labels.items()},
            taints=_taints(entry),
            **fields,
        )
        for node_name in names
    ]


def parse_nodes(data: Any) -> tuple[NodeSpec, ...]:
    """Node specs from a parsed nodes file (see the module docstring for the format)."""
    if isinstance(data, Mapping):
        data = data.get("nodes")
    if not isinstance(data, Sequence) or isinstance(data, str) or not data:
        raise _fail("top level", "expected a non-empty list under 'nodes'")
    specs: list[NodeSpec] = []
    for i, entry in enumerate(data):
        if not isinstance(entry, Mapping):
            raise _fail(f"nodes[{i}]", "expected a mapping")
        try:
            specs.extend(_entry_specs(entry))
        except ValueError as exc:
            raise _fail(f"nodes[{i}]", str(exc)) from None
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise _fail("nodes", f"node name {spec.name!r} appears twice")
        seen.add(spec.name)
    return tuple(specs)


def load_nodes_file(path: Path) -> tuple[NodeSpec, ...]:
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"nodes file {path}: not valid YAML/JSON: {exc}") from None
    return parse_nodes(data)


@dataclass(frozen=True, slots=True)
class PreemptionResult:
    node: str
    pods_deleted: tuple[str, ...]
    notice_s: float
    return_after_s: float | None = None


class NodeLifecycle:
    """Registers nodes, garbage-collects pods of vanished nodes, and preempts spot nodes."""

    def __init__(self, store: Store, cache: Cache, *, recorder: EventRecorder) -> None:
        self.store = store
        self.cache = cache
        self.recorder = recorder
        self._gone: list[str] = []
        self._wakeup = asyncio.Event()
        self.preempting: set[str] = set()
        self._drained: dict[str, asyncio.Event] = {}
        self._registered: dict[str, tuple[NodeSpec, str]] = {}  # name -> (spec, address)
        self._returning: dict[str, asyncio.Task[None]] = {}
        cache.on(NODES, self._on_node)
        cache.on(PODS, self._on_pod)

    def _on_pod(self, event: str, old: Obj | None, _new: Obj | None) -> None:
        if event == "DELETED" and old is not None:
            node = old.get("spec", {}).get("nodeName")
            if node in self._drained and not self.cache.by(PODS, "node", node):
                self._drained[node].set()

    def register(self, specs: Sequence[NodeSpec], *, addresses: Sequence[str]) -> None:
        now = rfc3339(self.store.now())
        for spec, address in zip(specs, addresses, strict=True):
            self._registered[spec.name] = (spec, address)
            with contextlib.suppress(AlreadyExists):
                self.store.create(NODES, node_object(spec, address=address, now=now))

    def _on_node(self, event: str, old: Obj | None, _new: Obj | None) -> None:
        if event == "DELETED" and old is not None:
            self._gone.append(old["metadata"]["name"])
            self._wakeup.set()

    def restore(self, name: str) -> bool:
        """Register a node that went away again (False: it is there, or never was)."""
        if name not in self._registered or self.store.peek(NODES, "", name) is not None:
            return False
        task = self._returning.pop(name, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        spec, address = self._registered[name]
        self.register([spec], addresses=[address])
        return True

    async def _return_later(self, name: str, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self.restore(name)

    async def run(self) -> None:
        """Pod GC: force-delete pods bound to nodes that no longer exist."""
        try:
            await self._collect()
        finally:
            for task in self._returning.values():
                task.cancel()
            self._returning.clear()

    async def _collect(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            gone, self._gone = self._gone, []
            for node in gone:
                if self.store.peek(NODES, "", node) is not None:
                    continue  # re-created meanwhile
                for pod in self.cache.by(PODS, "node", node):
                    meta = pod["metadata"]
                    with contextlib.suppress(NotFound):
                        self.store.delete(PODS, meta["namespace"], meta["name"], grace_period_s=0)
                await asyncio.sleep(0)

    def _taint(self, name: str, notice_s: float) -> Obj:
        node = self.store.peek(NODES, "", name)
        if node is None:
            raise NotFound.of("", "nodes", name)
        now = rfc3339(self.store.now())
        taints = [dict(t) for t in node.get("spec", {}).get("taints") or ()]
        have = {t.get("key") for t in taints}
        for key in (UNSCHEDULABLE_TAINT, *INTERRUPTION_TAINTS):
            if key not in have:
                taints.append({"key": key, "effect": "NoSchedule", "timeAdded": now})
        updated = self.store.update(
            NODES,
            {**node, "spec": {**node.get("spec", {}), "unschedulable": True, "taints": taints}},
        )
        self.recorder.record(
            updated,
            event_type="Warning",
            reason="SpotInterruption",
            message=f"Spot interruption notice: node {name} will be terminated in {notice_s:g}s",
        )
        return updated

    async def preempt(
        self, name: str, *, notice_s: float, return_after_s: float | None = None
    ) -> PreemptionResult:
        """Notice, wait, drain with each pod's grace, remove the node; maybe bring it back."""
        if return_after_s is not None and return_after_s < 0:
            raise ValueError(f"return_after_s must be >= 0 seconds, got {return_after_s}")
        node = self.store.peek(NODES, "", name)
        if node is None:
            raise NotFound.of("", "nodes", name)
        self.preempting.add(name)
        try:
            self._taint(name, notice_s)
            await asyncio.sleep(notice_s)
            deleted: list[str] = []
            for pod in self.cache.by(PODS, "node", name):
                meta = pod["metadata"]
                with contextlib.suppress(NotFound):
                    self.store.delete(PODS, meta["namespace"], meta["name"])
                    deleted.append(f"{meta['namespace']}/{meta['name']}")
            # Wait for the kubelet to finish them (each within its grace period).
            longest = max(
                (
                    float(p["metadata"].get("deletionGracePeriodSeconds", 30))
                    for p in self.cache.by(PODS, "node", name)
                ),
                default=0.0,
            )
            drained = self._drained.setdefault(name, asyncio.Event())
            if not self.cache.by(PODS, "node", name):
                drained.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(drained.wait(), longest + 5.0)
            with contextlib.suppress(NotFound):
                self.store.delete(NODES, "", name)
            if return_after_s is not None:
                self._returning[name] = asyncio.create_task(
                    self._return_later(name, return_after_s), name=f"return-{name}"
                )
            return PreemptionResult(name, tuple(deleted), notice_s, return_after_s)
        finally:
            self.preempting.discard(name)
            self._drained.pop(name, None)
