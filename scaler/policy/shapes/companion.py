"""A shape's companion Deployment ``<name>-<shape>``, as a pure builder (docs/shapes.md).

A model runs its extra shapes the way it runs spot: a companion Deployment
per shape (:mod:`scaler.policy.placement.companion` for spot), made from the
user's pod template changed for the shape
(:func:`~scaler.policy.shapes.template.shape_template`: its device, its
nodes, its arguments and environment, the pod label
``placement.tidal.dev/shape``). The user's Deployment runs the shape its
template already is (or none: it then stays at zero).

- :func:`build_shape_companion`: owned by the user's Deployment (deleted
  with it), with no opt-in label and none of the user's annotations (part of
  the user's target, never a target of its own); its pods carry the user's
  pod labels (the Service and the activator see one pool) plus the shape
  label, which is also in its selector so that it never selects the user's
  pods or another shape's. The Deployment itself is labelled
  ``placement.tidal.dev/shape: <shape>`` so the scaler watches its
  companions by label.
- :func:`shape_template_hash` (annotation ``placement.tidal.dev/template-hash``):
  a hash of the template the companion's pods are made from, so a change of
  the user's template or of the shape's declaration rolls the companion and
  nothing else does.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from scaler.policy.placement.companion import (
    COMPANION_OF,
    OPT_IN_LABEL,
    TEMPLATE_HASH,
    user_template,
)
from scaler.policy.shapes.declarations import ChosenShape
from scaler.policy.shapes.template import SHAPE_LABEL, shape_template

__all__ = [
    "build_shape_companion",
    "shape_companion_name",
    "shape_template_hash",
]

Obj = dict[str, Any]

_MANAGED_BY = "app.kubernetes.io/managed-by"
_MAX_NAME = 253


def shape_companion_name(name: str, shape: str) -> str:
    """``<name>-<shape>``; refused when longer than a Deployment name may be."""
    result = f"{name}-{shape}"
    if len(result) > _MAX_NAME:
        raise ValueError(
            f"Deployment name {name!r} is too long for the companion of shape {shape}: "
            f"{result!r} has {len(result)} characters, at most {_MAX_NAME} are allowed"
        )
    return result


def _template(deployment: Mapping[str, Any], chosen: ChosenShape) -> Obj:
    return shape_template(user_template(deployment), chosen)


def shape_template_hash(deployment: Mapping[str, Any], chosen: ChosenShape) -> str:
    """What the companion's pods are made from (see the module docstring)."""
    text = json.dumps(_template(deployment, chosen), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_shape_companion(
    deployment: Mapping[str, Any], chosen: ChosenShape, *, replicas: int
) -> Obj:
    """The companion Deployment of ``chosen`` for ``deployment`` (module docstring).

    Raises ``ValueError`` for a Deployment without name, namespace, uid or selector,
    or a template the shape cannot be applied to."""
    if replicas < 0:
        raise ValueError(f"replicas must be >= 0, got {replicas}")
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    if not name or not namespace or not uid:
        raise ValueError("the user's Deployment needs metadata.name, namespace and uid")
    selector = copy.deepcopy(spec.get("selector") or {})
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        raise ValueError(f"Deployment {namespace}/{name} has no spec.selector")
    shape = chosen.shape.name
    shape_label = {SHAPE_LABEL: shape}
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), **shape_label}
    companion_spec: Obj = {
        "replicas": replicas,
        "selector": selector,
        "template": _template(deployment, chosen),
    }
    for key in ("strategy", "minReadySeconds", "progressDeadlineSeconds", "revisionHistoryLimit"):
        if key in spec:
            companion_spec[key] = copy.deepcopy(spec[key])
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != OPT_IN_LABEL}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": shape_companion_name(str(name), shape),
            "namespace": namespace,
            "labels": {**labels, **shape_label, _MANAGED_BY: "tidal"},
            "annotations": {
                COMPANION_OF: name,
                TEMPLATE_HASH: shape_template_hash(deployment, chosen),
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
