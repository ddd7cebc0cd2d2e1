"""The spot companion Deployment ``<name>-spot`` and the on-demand pin, as pure builders.

For a spot policy the user's Deployment runs the on-demand share and a
companion Deployment runs the spot share (docs/placement.md). This module builds
the objects and patches; the actuator writes them.

- :func:`build_companion`: the user's pod template plus the provider's spot
  node selector and tolerations and a zone topology-spread constraint
  (``ScheduleAnyway``: spread when it can, never Pending for it). Owned by
  the user's Deployment, so deleting it deletes the companion. It carries
  no opt-in label and none of the user's annotations: it is part of the
  user's target, never a target of its own. Its pods carry the user's pod
  labels (the Service and the activator see one pool) plus
  ``placement.tidal.dev/capacity-type: spot``, which is also in its
  selector so that its selector never matches the user's own pods.
- :func:`template_hash` (annotation ``placement.tidal.dev/template-hash``):
  a hash of the user's template *without* Tidal's pin, and of the provider's
  spot requirement. :func:`companion_outdated` compares it: a user template
  change rolls the companion; the pin, a scale change or anything else does
  not.
- :func:`pin_patch` / :func:`unpin_patch`: JSON merge patches (RFC 7386)
  that pin the user's Deployment to on-demand capacity and take the pin off
  again. Pinning changes the pod template, so it rolls the user's pods
  once (the caller announces it with an Event). What was pinned is recorded
  in the Deployment annotation ``placement.tidal.dev/on-demand-pin`` so that
  unpinning removes exactly Tidal's requirement and never one the user set.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from scaler.policy.placement.providers import NodeRequirement, ProviderPreset

__all__ = [
    "CAPACITY_TYPE_LABEL",
    "COMPANION_OF",
    "COMPANION_SUFFIX",
    "ON_DEMAND_PIN",
    "OPT_IN_LABEL",
    "TEMPLATE_HASH",
    "build_companion",
    "companion_name",
    "companion_outdated",
    "is_pinned",
    "pin_patch",
    "template_hash",
    "unpin_patch",
    "user_template",
]

Obj = dict[str, Any]

COMPANION_SUFFIX = "-spot"
TEMPLATE_HASH = "placement.tidal.dev/template-hash"
COMPANION_OF = "placement.tidal.dev/companion-of"
ON_DEMAND_PIN = "placement.tidal.dev/on-demand-pin"
CAPACITY_TYPE_LABEL = "placement.tidal.dev/capacity-type"
OPT_IN_LABEL = "autoscaling.tidal.dev/enabled"
_MANAGED_BY = "app.kubernetes.io/managed-by"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_MAX_NAME = 253


def companion_name(name: str) -> str:
    """``<name>-spot``; refused when that is longer than a Deployment name may be."""
    result = name + COMPANION_SUFFIX
    if len(result) > _MAX_NAME:
        raise ValueError(
            f"Deployment name {name!r} is too long for a spot companion: "
            f"{result!r} has {len(result)} characters, at most {_MAX_NAME} are allowed"
        )
    return result


# --- node requirements on a pod spec -------------------------------------------


def _add_requirement(pod_spec: Obj, requirement: NodeRequirement) -> None:
    selector = requirement.as_selector
    if selector is not None:
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **selector}
        return
    affinity = pod_spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault(_REQUIRED, {})
    terms = required.get("nodeSelectorTerms") or [{}]
    # Terms are ORed and expressions ANDed: the requirement joins every term.
    expression = requirement.as_dict()
    required["nodeSelectorTerms"] = [
        {**term, "matchExpressions": [*(term.get("matchExpressions") or []), expression]}
        for term in terms
    ]


def _remove_requirement(pod_spec: Obj, requirement: NodeRequirement) -> None:
    selector = requirement.as_selector
    if selector is not None:
        node_selector = dict(pod_spec.get("nodeSelector") or {})
        for key, value in selector.items():
            if node_selector.get(key) == value:
                del node_selector[key]
        if node_selector:
            pod_spec["nodeSelector"] = node_selector
        else:
            pod_spec.pop("nodeSelector", None)
        return
    affinity = pod_spec.get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get(_REQUIRED) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return
    expression = requirement.as_dict()
    kept = []
    for term in terms:
        exprs = [e for e in term.get("matchExpressions") or [] if e != expression]
        rest = {k: v for k, v in term.items() if k != "matchExpressions"}
        if exprs:
            rest["matchExpressions"] = exprs
        if rest:
            kept.append(rest)
    if kept:
        required["nodeSelectorTerms"] = kept
        return
    # Only Tidal's requirement was there: take away what it created.
    node_affinity = affinity["nodeAffinity"]
    del node_affinity[_REQUIRED]
    if not node_affinity:
        del affinity["nodeAffinity"]
    if not affinity:
        pod_spec.pop("affinity", None)


def _pinned_requirement(deployment: Mapping[str, Any]) -> NodeRequirement | None:
    text = ((deployment.get("metadata") or {}).get("annotations") or {}).get(ON_DEMAND_PIN)
    if not text:
        return None
    try:
        data = json.loads(text)
        return NodeRequirement(str(data["key"]), str(data["operator"]), tuple(data["values"]))
    except (ValueError, KeyError, TypeError):
        return None  # not ours to read: treat as unpinned rather than guess


def is_pinned(deployment: Mapping[str, Any], preset: ProviderPreset) -> bool:
    """Whether Tidal's on-demand pin for ``preset`` is recorded on the Deployment."""
    return _pinned_requirement(deployment) == preset.on_demand


def user_template(deployment: Mapping[str, Any]) -> Obj:
    """The user's pod template as the user wrote it: Tidal's pin taken out."""
    template = copy.deepcopy((deployment.get("spec") or {}).get("template") or {})
    pinned = _pinned_requirement(deployment)
    if pinned is not None:
        _remove_requirement(template.setdefault("spec", {}), pinned)
    return template


def template_hash(deployment: Mapping[str, Any], preset: ProviderPreset) -> str:
    """What the companion's pods are made from: the user's template and the spot requirement."""
    material = {
        "template": user_template(deployment),
        "spot": preset.spot.as_dict(),
        "tolerations": [t.as_dict() for t in preset.spot_tolerations],
        "zone": preset.zone_label,
    }
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def companion_outdated(
    companion: Mapping[str, Any], deployment: Mapping[str, Any], preset: ProviderPreset
) -> bool:
    """Whether the companion's template must be rebuilt (its hash differs)."""
    annotations = (companion.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(TEMPLATE_HASH) != template_hash(deployment, preset))


def build_companion(deployment: Mapping[str, Any], *, preset: ProviderPreset, replicas: int) -> Obj:
    """The companion Deployment for ``deployment`` (see the module docstring)."""
    if replicas < 0:
        raise ValueError(f"replicas must be >= 0, got {replicas}")
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    if not name or not namespace or not uid:
        raise ValueError("the user's Deployment needs metadata.name, namespace and uid")
    match_labels = (spec.get("selector") or {}).get("matchLabels")
    if not match_labels and not (spec.get("selector") or {}).get("matchExpressions"):
        raise ValueError(f"Deployment {namespace}/{name} has no spec.selector")
    spot_label = {CAPACITY_TYPE_LABEL: "spot"}

    template = user_template(deployment)
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = {**(template_meta.get("labels") or {}), **spot_label}
    pod_spec = template.setdefault("spec", {})
    _add_requirement(pod_spec, preset.spot)
    tolerations = list(pod_spec.get("tolerations") or [])
    for toleration in preset.spot_tolerations:
        if toleration.as_dict() not in tolerations:
            tolerations.append(toleration.as_dict())
    if tolerations:
        pod_spec["tolerations"] = tolerations
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), **spot_label}
    spread = list(pod_spec.get("topologySpreadConstraints") or [])
    if not any(c.get("topologyKey") == preset.zone_label for c in spread):
        spread.append(
            {
                "maxSkew": 1,
                "topologyKey": preset.zone_label,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": copy.deepcopy(selector),
            }
        )
    pod_spec["topologySpreadConstraints"] = spread

    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != OPT_IN_LABEL}
    companion_spec: Obj = {"replicas": replicas, "selector": selector, "template": template}
    for key in ("strategy", "minReadySeconds", "progressDeadlineSeconds", "revisionHistoryLimit"):
        if key in spec:
            companion_spec[key] = copy.deepcopy(spec[key])
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": companion_name(name),
            "namespace": namespace,
            "labels": {**labels, **spot_label, _MANAGED_BY: "tidal"},
            "annotations": {
                COMPANION_OF: name,
                TEMPLATE_HASH: template_hash(deployment, preset),
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": companion_spec,
    }


def _template_spec_patch(before: Obj, after: Obj) -> Obj:
    """A merge patch turning pod spec ``before`` into ``after`` for the two fields touched."""
    patch: Obj = {}
    before_selector = before.get("nodeSelector") or {}
    after_selector = after.get("nodeSelector") or {}
    if before_selector and not after_selector:
        patch["nodeSelector"] = None  # all gone: no empty map left behind
    elif before_selector != after_selector:
        patch["nodeSelector"] = {
            **{k: None for k in before_selector if k not in after_selector},
            **{k: v for k, v in after_selector.items() if before_selector.get(k) != v},
        }
    if before.get("affinity") != after.get("affinity"):
        # Lists are replaced whole by a merge patch, so send the affinity whole.
        patch["affinity"] = after.get("affinity")
    return patch


def pin_patch(deployment: Mapping[str, Any], preset: ProviderPreset) -> Obj | None:
    """The merge patch that pins the user's Deployment to on-demand, ``None`` when pinned."""
    if is_pinned(deployment, preset):
        return None
    before = user_template(deployment).get("spec") or {}
    after = copy.deepcopy(before)
    _add_requirement(after, preset.on_demand)
    current = (deployment.get("spec") or {}).get("template", {}).get("spec") or {}
    record = json.dumps(preset.on_demand.as_dict(), sort_keys=True)
    return {
        "metadata": {"annotations": {ON_DEMAND_PIN: record}},
        "spec": {"template": {"spec": _template_spec_patch(current, after)}},
    }


def unpin_patch(deployment: Mapping[str, Any]) -> Obj | None:
    """The merge patch that takes Tidal's pin off again, ``None`` when there is none."""
    annotations = (deployment.get("metadata") or {}).get("annotations") or {}
    if ON_DEMAND_PIN not in annotations:
        return None
    current = (deployment.get("spec") or {}).get("template", {}).get("spec") or {}
    after = user_template(deployment).get("spec") or {}
    return {
        "metadata": {"annotations": {ON_DEMAND_PIN: None}},
        "spec": {"template": {"spec": _template_spec_patch(current, after)}},
    }
