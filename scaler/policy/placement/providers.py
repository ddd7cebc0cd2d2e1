"""Where spot and on-demand capacity live on each provider, and how a node says it is going.

A :class:`ProviderPreset` holds, for one way of running GPU nodes, the node
label that tells spot from on-demand, the tolerations spot nodes require,
and the taints that announce an interruption. The scaler setting
``placement.provider`` picks one of :data:`PRESETS` (Karpenter, the
default; GKE; AKS; EKS managed node groups) or builds a custom one; extra
notice-taint keys can be added to any preset.

- **karpenter** (the default): label ``karpenter.sh/capacity-type``, values
  ``spot``/``on-demand``; spot nodes untainted; notice taint
  ``karpenter.sh/disrupted``.
- **gke**: label ``cloud.google.com/gke-spot: "true"`` on spot nodes only;
  toleration for ``cloud.google.com/gke-spot=true:NoSchedule``; notice taint
  ``cloud.google.com/impending-node-termination``.
- **aks**: label ``kubernetes.azure.com/scalesetpriority: spot`` on spot
  nodes only; toleration for ``kubernetes.azure.com/scalesetpriority=spot:NoSchedule``;
  no notice taint built in (see below).
- **eks** (managed node groups): label ``eks.amazonaws.com/capacityType``,
  values ``SPOT``/``ON_DEMAND``; notice taints of the AWS Node Termination
  Handler (``aws-node-termination-handler/*``).

Sources for the keys: Karpenter's ``DisruptedTaintKey`` (``karpenter.sh/disrupted``,
NoSchedule, set by its disruption and interruption controllers before it
drains a node); GKE's maintenance handler taints with
``cloud.google.com/impending-node-termination``; the AWS Node Termination
Handler's ``TAINT_NODE`` uses ``spot-itn``, ``scheduled-maintenance``,
``asg-lifecycle-termination`` and ``rebalance-recommendation`` under
``aws-node-termination-handler/``. AKS delivers spot evictions as Azure
Scheduled Events with no Kubernetes taint of its own: add the key your
handler sets (``placement.notice_taints``); without one, cover comes when
the pods are evicted.

Main decision: the on-demand side is always selected by a node *affinity*
requirement that also matches nodes without the label (``NotIn`` the spot
values) where a provider marks only its spot nodes (GKE, AKS), and by the
exact label value where a provider labels both (Karpenter, EKS); the spot
side is always the exact label value, so it never lands elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from scaler.policy.placement.availability import CapacityType

__all__ = [
    "PRESETS",
    "PROVIDERS",
    "NodeRequirement",
    "ProviderPreset",
    "Toleration",
    "custom_preset",
    "preset",
]


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """A node-affinity ``matchExpression``: ``key`` ``operator`` ``values``."""

    key: str
    operator: str  # In | NotIn
    values: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"key": self.key, "operator": self.operator, "values": list(self.values)}

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value in self.values
        return value not in self.values  # NotIn matches a missing label too

    @property
    def as_selector(self) -> dict[str, str] | None:
        """The same as a plain ``nodeSelector`` entry, where one value says it."""
        if self.operator == "In" and len(self.values) == 1:
            return {self.key: self.values[0]}
        return None


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    value: str | None = None
    effect: str = "NoSchedule"

    def as_dict(self) -> dict[str, str]:
        if self.value is None:
            return {"key": self.key, "operator": "Exists", "effect": self.effect}
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


@dataclass(frozen=True, slots=True)
class ProviderPreset:
    """Labels, tolerations and notice taints of one provider (see the module docstring)."""

    name: str
    capacity_label: str
    spot_value: str
    on_demand_value: str | None  # None: on-demand nodes carry no such label
    spot_tolerations: tuple[Toleration, ...] = ()
    notice_taints: tuple[str, ...] = ()
    zone_label: str = "topology.kubernetes.io/zone"
    gpu_product_label: str = "nvidia.com/gpu.product"

    @property
    def spot(self) -> NodeRequirement:
        return NodeRequirement(self.capacity_label, "In", (self.spot_value,))

    @property
    def on_demand(self) -> NodeRequirement:
        if self.on_demand_value is None:
            return NodeRequirement(self.capacity_label, "NotIn", (self.spot_value,))
        return NodeRequirement(self.capacity_label, "In", (self.on_demand_value,))

    def capacity_of(self, labels: Mapping[str, str]) -> CapacityType | None:
        """The node's capacity type from its labels, ``None`` when it is neither."""
        if self.spot.matches(labels):
            return CapacityType.SPOT
        if self.on_demand.matches(labels):
            return CapacityType.ON_DEMAND
        return None

    def under_notice(self, taints: Iterable[Mapping[str, object]]) -> bool:
        """Whether a node with these ``spec.taints`` has an interruption notice."""
        keys = set(self.notice_taints)
        return any(t.get("key") in keys for t in taints)

    def with_notice_taints(self, extra: Iterable[str]) -> ProviderPreset:
        return replace(self, notice_taints=tuple(dict.fromkeys((*self.notice_taints, *extra))))


_NTH = "aws-node-termination-handler/"

PRESETS: dict[str, ProviderPreset] = {
    "karpenter": ProviderPreset(
        name="karpenter",
        capacity_label="karpenter.sh/capacity-type",
        spot_value="spot",
        on_demand_value="on-demand",
        notice_taints=("karpenter.sh/disrupted",),
    ),
    "gke": ProviderPreset(
        name="gke",
        capacity_label="cloud.google.com/gke-spot",
        spot_value="true",
        on_demand_value=None,
        spot_tolerations=(Toleration("cloud.google.com/gke-spot", "true"),),
        notice_taints=("cloud.google.com/impending-node-termination",),
    ),
    "aks": ProviderPreset(
        name="aks",
        capacity_label="kubernetes.azure.com/scalesetpriority",
        spot_value="spot",
        on_demand_value=None,
        spot_tolerations=(Toleration("kubernetes.azure.com/scalesetpriority", "spot"),),
    ),
    "eks": ProviderPreset(
        name="eks",
        capacity_label="eks.amazonaws.com/capacityType",
        spot_value="SPOT",
        on_demand_value="ON_DEMAND",
        notice_taints=(
            _NTH + "spot-itn",
            _NTH + "scheduled-maintenance",
            _NTH + "asg-lifecycle-termination",
            _NTH + "rebalance-recommendation",
        ),
    ),
}
PROVIDERS = (*PRESETS, "custom")


def preset(name: str, *, extra_notice_taints: Iterable[str] = ()) -> ProviderPreset:
    """The named preset, with extra notice-taint keys added."""
    if name not in PRESETS:
        raise ValueError(
            f"unknown provider {name!r}; allowed: {', '.join(PROVIDERS)} "
            "(custom takes the capacity label and values from the settings)"
        )
    return PRESETS[name].with_notice_taints(extra_notice_taints)


def custom_preset(
    *,
    capacity_label: str,
    spot_value: str,
    on_demand_value: str | None,
    spot_tolerations: Iterable[Toleration] = (),
    notice_taints: Iterable[str] = (),
) -> ProviderPreset:
    """A provider described by its own keys (checked: a label key and distinct values)."""
    if not capacity_label or "=" in capacity_label or " " in capacity_label:
        raise ValueError(f"capacity label must be a label key, got {capacity_label!r}")
    if not spot_value:
        raise ValueError("the spot label value must not be empty")
    if on_demand_value == spot_value:
        raise ValueError(
            f"the on-demand label value must differ from the spot one, both are {spot_value!r}"
        )
    return ProviderPreset(
        name="custom",
        capacity_label=capacity_label,
        spot_value=spot_value,
        on_demand_value=on_demand_value,
        spot_tolerations=tuple(spot_tolerations),
        notice_taints=tuple(dict.fromkeys(notice_taints)),
    )
