"""A shape's pod template, built from the user's, as a pure function (docs/shapes.md).

Tidal runs a model on another GPU shape the way it runs it on spot: a
companion Deployment made from the user's pod template
(:mod:`scaler.policy.placement.companion`). :func:`shape_template` makes that
template for one :class:`~scaler.policy.shapes.declarations.ChosenShape`:

1. **the device**: in the container that asks for a GPU device
   (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``,
   or the shape's own resource; the first container when none does), those
   are taken out of ``limits`` and ``requests`` and the shape's resource
   and count put in ``limits`` (and in ``requests`` where the container had
   one: an extended resource's request must equal its limit);
2. **the nodes**: the user's ``nodeSelector`` entries under ``nvidia.com/``
   (GPU feature discovery's labels, which pin a GPU) give way to the
   shape's selector; the rest stays, and so does node affinity;
3. **the arguments**: each flag of the shape's ``shape-args`` replaces the
   same flag where the container has it (in ``command`` or ``args``,
   ``--flag value`` or ``--flag=value``, with the values that follow it),
   or is added to ``args``;
4. **the environment**: each ``shape-env`` variable is set, replacing an
   entry of that name (a ``valueFrom`` one too), or added;
5. **the label** ``placement.tidal.dev/shape: <name>`` on the pods, so a
   companion's selector keeps its pods apart from the user's.

:func:`template_shape` answers the converse: which listed shape the user's
template already is (its device and count, and the shape's selector in its
``nodeSelector``), so that the user's Deployment can stand for that shape
and only the others need a companion.

Main decision: a template asking for devices in two containers is refused
(``ValueError`` naming them): a shape is one replica's device, and which
container should have it would be a guess.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from scaler.policy.shapes.declarations import ChosenShape, Shape

__all__ = ["SHAPE_LABEL", "accelerator_container", "shape_template", "template_shape"]

Obj = dict[str, Any]

SHAPE_LABEL = "placement.tidal.dev/shape"
_GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
_MIG_PREFIX = "nvidia.com/mig-"
_GPU_LABELS = "nvidia.com/"


def _is_device(resource: str, shape_resource: str | None = None) -> bool:
    return (
        resource in _GPU_RESOURCES or resource.startswith(_MIG_PREFIX) or resource == shape_resource
    )


def _devices_of(container: Mapping[str, Any], shape_resource: str | None) -> dict[str, str]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: str(v) for name, v in merged.items() if _is_device(name, shape_resource)}


def accelerator_container(pod_spec: Mapping[str, Any], shape_resource: str | None = None) -> int:
    """The index of the container that asks for a GPU device (0 when none does).

    Raises ``ValueError`` when two do.
    """
    containers = pod_spec.get("containers") or []
    asking = [i for i, c in enumerate(containers) if _devices_of(c, shape_resource)]
    if len(asking) > 1:
        names = ", ".join(str(containers[i].get("name", i)) for i in asking)
        raise ValueError(
            f"containers {names} all ask for GPU devices; a shape gives one of them its device"
        )
    if not containers:
        raise ValueError("the pod template has no containers")
    return asking[0] if asking else 0


def _swap_device(container: Obj, shape: Shape) -> None:
    resources = container.setdefault("resources", {})
    had_requests = any(_is_device(n, shape.resource) for n in resources.get("requests") or {})
    for part in ("limits", "requests"):
        kept = {
            n: v
            for n, v in (resources.get(part) or {}).items()
            if not _is_device(n, shape.resource)
        }
        if part == "limits" or had_requests:
            kept[shape.resource] = str(shape.count)
        if kept:
            resources[part] = kept
        else:
            resources.pop(part, None)


def _flag_name(word: str) -> str | None:
    return word.partition("=")[0] if word.startswith("-") else None


def _split_flags(words: Sequence[str]) -> list[list[str]]:
    """Words grouped as [leading positionals], [flag, values...], ..."""
    groups: list[list[str]] = [[]]
    for word in words:
        if _flag_name(word) is not None:
            groups.append([word])
        else:
            groups[-1].append(word)
    return groups


def _override_args(container: Obj, overrides: Sequence[str]) -> None:
    wanted = _split_flags(overrides)[1:]  # the annotation starts with a flag
    remaining = {_flag_name(g[0]): g for g in wanted}
    for part in ("command", "args"):
        words = container.get(part)
        if not words:
            continue
        groups = _split_flags([str(w) for w in words])
        out = list(groups[0])
        for group in groups[1:]:
            name = _flag_name(group[0])
            if name in remaining:
                out.extend(remaining.pop(name))
            else:
                out.extend(group)
        container[part] = out
    extra = [word for group in wanted if _flag_name(group[0]) in remaining for word in group]
    if extra:
        container["args"] = [*(container.get("args") or []), *extra]


def _override_env(container: Obj, env: Sequence[tuple[str, str]]) -> None:
    values = dict(env)
    entries = []
    for entry in container.get("env") or []:
        name = entry.get("name")
        if name in values:
            entries.append({"name": name, "value": values.pop(name)})
        else:
            entries.append(entry)
    entries.extend({"name": name, "value": value} for name, value in values.items())
    if entries:
        container["env"] = entries


def shape_template(template: Mapping[str, Any], chosen: ChosenShape) -> Obj:
    """The pod template of ``chosen``'s companion, from the user's (module docstring).

    ``template`` is the user's pod template as the user wrote it
    (:func:`scaler.policy.placement.companion.user_template`); it is not changed.
    Raises ``ValueError`` for a template with no containers, or devices in two.
    """
    shape = chosen.shape
    out = copy.deepcopy(dict(template))
    pod_spec = out.setdefault("spec", {})
    index = accelerator_container(pod_spec, shape.resource)
    container = pod_spec["containers"][index]
    _swap_device(container, shape)
    selector = {
        k: v
        for k, v in (pod_spec.get("nodeSelector") or {}).items()
        if not k.startswith(_GPU_LABELS)
    }
    selector.update(dict(shape.node_selector))
    if selector:
        pod_spec["nodeSelector"] = selector
    else:
        pod_spec.pop("nodeSelector", None)
    if chosen.args:
        _override_args(container, chosen.args)
    if chosen.env:
        _override_env(container, chosen.env)
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), SHAPE_LABEL: shape.name}
    return out


def template_shape(template: Mapping[str, Any], shapes: Sequence[ChosenShape]) -> str | None:
    """The first of ``shapes`` that the user's template already is, or None."""
    pod_spec = template.get("spec") or {}
    selector = pod_spec.get("nodeSelector") or {}
    for chosen in shapes:
        shape = chosen.shape
        try:
            index = accelerator_container(pod_spec, shape.resource)
        except ValueError:
            return None
        devices = _devices_of(pod_spec["containers"][index], shape.resource)
        if devices == {shape.resource: str(shape.count)} and all(
            selector.get(k) == v for k, v in shape.node_selector
        ):
            return shape.name
    return None
