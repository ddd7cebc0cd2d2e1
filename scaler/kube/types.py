"""What the controller knows of the cluster, and the seams it acts through.

Plain frozen values (:class:`DeploymentInfo`, :class:`PodInfo`,
:class:`TargetSnapshot`) and Protocols (:class:`ClusterView`,
:class:`ScaleTarget`, :class:`EventSink`, :class:`LeaderElector`). This module
imports no Kubernetes client, so the controller and its tests depend on these
shapes only; ``scaler.kube.cluster``, ``.writer`` and ``.leader`` implement
them with kubernetes_asyncio, and tests implement them with small fakes. Only
:mod:`scaler.actuator` uses ``.writer`` (an import contract says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "ENABLED_LABEL",
    "POD_DELETION_COST",
    "STATUS_ANNOTATION",
    "ClusterView",
    "CompanionInfo",
    "CompanionWrites",
    "DeploymentInfo",
    "EventSink",
    "EventSubject",
    "LabelRequirement",
    "LabelSelector",
    "LeaderElector",
    "NodeInfo",
    "PodInfo",
    "PodLabels",
    "PoolInfo",
    "PoolState",
    "ScaleState",
    "ScaleTarget",
    "TargetSnapshot",
]

ENABLED_LABEL = "autoscaling.tidal.dev/enabled"
STATUS_ANNOTATION = "autoscaling.tidal.dev/status"
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return False  # an unknown operator selects nothing, as the API server would refuse it


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Deployment's ``spec.selector``. An empty selector matches nothing here:
    apps/v1 requires one, and matching every pod in a namespace would be wrong."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if not self.match_labels and not self.match_expressions:
            return False
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


@dataclass(frozen=True, slots=True)
class DeploymentInfo:
    namespace: str
    name: str
    uid: str
    annotations: Mapping[str, str]
    spec_replicas: int
    ready_replicas: int
    selector: LabelSelector
    resource_version: str = ""
    # GPUs one replica asks for (``nvidia.com/gpu`` limits, else requests, summed
    # over containers); 1 when the template names none, for GPU-seconds only.
    gpus_per_replica: int = 1
    # The object as served (placement builds the spot companion from its pod
    # template, and reads the on-demand pin); not compared, not shown.
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # The pod template's labels: what an InferencePool's selector is matched against.
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    api_version = "apps/v1"
    kind = "Deployment"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PoolInfo:
    """An ``InferencePool`` (``inference.networking.k8s.io/v1``) as the scaler sees it.

    ``selector``: its ``spec.selector.matchLabels`` (the v1 kind has no
    expressions); ``target_ports``: the model servers' ports; ``picker``: the
    endpoint picker's Service name and port (``None`` when the pool names no
    Service); ``opted_in``: the opt-in label or annotation says ``"true"``.
    """

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    selector: Mapping[str, str]
    target_ports: tuple[int, ...] = ()
    picker: tuple[str, int] | None = None
    opted_in: bool = False
    resource_version: str = ""

    api_version = "inference.networking.k8s.io/v1"
    kind = "InferencePool"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod_labels: Mapping[str, str]) -> bool:
        """Whether pods labelled ``pod_labels`` are in the pool (an empty selector,
        which the CRD refuses, selects nothing)."""
        return bool(self.selector) and all(pod_labels.get(k) == v for k, v in self.selector.items())


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    labels: Mapping[str, str]
    ip: str | None
    ready: bool
    terminating: bool
    ports: Mapping[str, int] = field(default_factory=dict)  # named container ports
    deletion_cost: int | None = None
    # What placement needs (scaler.policy.placement.availability): where the pod runs,
    # its phase, when it was created (epoch seconds), whether it was evicted
    # (status.reason Evicted or a DisruptionTarget condition), its GPUs.
    node: str | None = None
    phase: str = "Running"
    created_at: float = 0.0
    evicted: bool = False
    gpus: int = 0
    ready_at: float | None = None  # epoch seconds it last turned Ready (None: not Ready)
    # The device resource it asks for (nvidia.com/gpu, a MIG profile's, or the
    # device plugin's renamed nvidia.com/gpu.shared): which devices it holds.
    gpu_resource: str = "nvidia.com/gpu"

    def port(self, number_or_name: int | str) -> int | None:
        if isinstance(number_or_name, int):
            return number_or_name
        if number_or_name.isdigit():
            return int(number_or_name)
        return self.ports.get(number_or_name)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node as placement sees it: its labels (capacity type, zone, GPU model) and taint keys."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CompanionInfo:
    """A spot companion Deployment ``<name>-spot`` (:mod:`scaler.policy.placement.companion`)."""

    namespace: str
    name: str
    companion_of: str
    spec_replicas: int
    ready_replicas: int
    template_hash: str
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class TargetSnapshot:
    deployment: DeploymentInfo
    pods: tuple[PodInfo, ...] = ()

    @property
    def ready_pods(self) -> tuple[PodInfo, ...]:
        return tuple(p for p in self.pods if p.ready and not p.terminating and p.ip)


class ClusterView(Protocol):
    """The opted-in Deployments and their pods, as last seen."""

    def targets(self) -> Mapping[str, TargetSnapshot]:
        """The targets; a new mapping whenever anything in it changed (copy on write), so
        a reader may tell "unchanged" by identity."""
        ...

    def pools(self) -> Mapping[str, PoolState]:
        """The opted-in InferencePools by key (``{}`` when pools are not watched)."""
        ...

    @property
    def synced(self) -> bool:
        """True once the Deployments have been listed at least once."""
        ...


@dataclass(frozen=True, slots=True)
class ScaleState:
    """A Deployment's ``spec.replicas`` and ``resourceVersion`` as just read."""

    replicas: int
    resource_version: str


class ScaleTarget(Protocol):
    """Writes the scaler makes to a Deployment and its pods (and the read a
    conflict needs)."""

    async def read_scale(self, namespace: str, name: str) -> ScaleState:
        """``spec.replicas`` and ``resourceVersion`` now, through ``/scale``."""
        ...

    async def scale(
        self, namespace: str, name: str, replicas: int, *, resource_version: str
    ) -> str:
        """Set ``spec.replicas`` through ``/scale`` if the Deployment is still at
        ``resource_version`` (:class:`~groundwork.kube.errors.Conflict` otherwise); the new
        ``resourceVersion``."""
        ...

    async def set_deletion_costs(self, namespace: str, costs: Mapping[str, int | None]) -> None:
        """Set ``controller.kubernetes.io/pod-deletion-cost`` on the named pods (``None``:
        remove it)."""
        ...

    async def write_status(
        self,
        namespace: str,
        name: str,
        status_json: str,
        *,
        replicas: int,
        has_annotations: bool = True,
    ) -> str:
        """Set the ``autoscaling.tidal.dev/status`` annotation if the Deployment's
        ``spec.replicas`` is still ``replicas`` (the scale the status records;
        :class:`~groundwork.kube.errors.Conflict` otherwise); the new ``resourceVersion``.
        ``has_annotations``: the Deployment had annotations when last seen."""
        ...


class PodLabels(Protocol):
    """The one label write the warm tier needs behind an InferencePool (docs/gateway-api.md)."""

    async def set_pod_labels(self, namespace: str, key: str, values: Mapping[str, str]) -> None:
        """Set label ``key`` on each named pod to its value (a pod gone is skipped)."""
        ...


class NodePreference(Protocol):
    """The warm tier's move: a Deployment's pods prefer a node (a rollout; docs/warm-tier.md)."""

    async def prefer_node(self, namespace: str, name: str, node: str | None) -> bool:
        """Make the pod template prefer ``node``; False when it already does."""
        ...


class CompanionWrites(Protocol):
    """Placement's writes (:mod:`scaler.kube.companion_writes`)."""

    async def read_deployment(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    async def ensure_companion(self, body: Mapping[str, Any]) -> str:
        """Create or replace (template hash differs); ``created``/``replaced``/``unchanged``."""
        ...

    async def delete_companion(self, namespace: str, name: str) -> bool: ...

    async def patch_deployment(self, namespace: str, name: str, patch: Mapping[str, Any]) -> str:
        """A merge patch; the Deployment's new ``resourceVersion``."""
        ...


@dataclass(frozen=True, slots=True)
class PoolState:
    """One opted-in pool, as :class:`~scaler.kube.pool_index.PoolIndex` decides it.

    ``selected``: the Deployments it selects (keys, sorted); ``shared_with``:
    the other opted-in pools that select one of them too (keys, sorted);
    ``listed``: its namespace's Deployments have been listed at all.
    """

    pool: PoolInfo
    selected: tuple[str, ...] = ()
    shared_with: tuple[str, ...] = ()
    listed: bool = True

    @property
    def bound_to(self) -> str | None:
        """The one Deployment this pool scales (``None``: none, see the docstring)."""
        if self.listed and len(self.selected) == 1 and not self.shared_with:
            return self.selected[0]
        return None


class EventSubject(Protocol):
    """What an Event is about: a Deployment, or an InferencePool."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def uid(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...


class EventSink(Protocol):
    async def emit(
        self, target: EventSubject, *, reason: str, message: str, warning: bool = False
    ) -> None: ...


class LeaderElector(Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def identity(self) -> str: ...
