"""docs/annotations.md: the opt-in label and each annotation, from the tables that read them.

The page's sections, each rendered from the table of keys it shows:
scaling and placement (:data:`groundwork.rules.scaling_keys.SCALING_KEYS`),
the GPU shapes' declarations (:data:`scaler.policy.shapes.declarations.SHAPE_SPECS`),
routing (:data:`groundwork.rules.routing_keys.ROUTING_KEYS`), InferencePools
(:data:`groundwork.rules.pool_keys.POOL_KEYS`), and what Tidal writes itself
(the status annotation and every Event reason,
:data:`scaler.policy.events.EVENT_REASONS`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from groundwork.rules.annotation_keys import Key
from groundwork.rules.pool_keys import POOL_KEYS
from groundwork.rules.routing_keys import ROUTING_KEYS
from groundwork.rules.scaling_keys import SCALING_KEYS
from scaler.policy.events import EVENT_REASONS
from scaler.policy.known_keys import STATUS_ANNOTATION
from scaler.policy.shapes.declarations import SHAPE_SPECS
from scripts.pages.table import GENERATED, row

__all__ = ["annotations_page"]


def annotations_page() -> str:
    """docs/annotations.md: the label and each annotation: default, allowed values, meaning."""
    lines = [
        *_intro(),
        *_scaling(),
        *_shapes(),
        *_routing(),
        *_pools(),
        *_written_by_tidal(),
        "",
    ]
    return "\n".join(lines)


def _intro() -> list[str]:
    return [
        "# Annotations",
        "",
        GENERATED.format(
            source="`groundwork/rules/scaling_keys.py` (SCALING_KEYS), "
            "`scaler/policy/shapes/declarations.py` (SHAPE_SPECS), "
            "`groundwork/rules/pool_keys.py` (POOL_KEYS), "
            "`groundwork/rules/routing_keys.py` (ROUTING_KEYS) and "
            "`scaler/policy/events.py` (EVENT_REASONS)"
        ),
        "",
        'Opt a Deployment in with the **label** `autoscaling.tidal.dev/enabled: "true"`;',
        "the knobs below are **annotations** on the same Deployment. Durations are",
        "Go-style (`500ms`, `90s`, `5m`, `1h30m`, `1.5h`; a bare `0` is zero, allowed",
        "where the key's range starts at 0s; no sign, and no other bare number);",
        "whole numbers are digits with an optional sign; percentages are 0-100. The",
        "activator and the scaler read every key by the same rules, so a value one",
        "of them refuses the other refuses too.",
        "",
        "Every value is checked. A bad one produces a Kubernetes",
        "Event of reason `InvalidAnnotation` naming each bad key, its value and what",
        "is allowed, and Tidal leaves that Deployment's scale alone until it is",
        "fixed (`tidal status` and `GET /v1/targets` show the problem too);",
        "requests held for it meanwhile are answered at once with a 503",
        "`not_woken` naming the Deployment and the annotation",
        "([statuses.md](statuses.md)). A key Tidal does not know under",
        "`autoscaling.tidal.dev/` or `placement.tidal.dev/` (a typo such as",
        "`max-scal`) is ignored with an `UnknownAnnotation` Warning that names the",
        'closest known key ("did you mean autoscaling.tidal.dev/max-scale?"); scaling',
        "goes on with the keys that are known. A bad `routing.tidal.dev/*` value (or an",
        "unknown key, named the same way) falls back to its default, so one typo does not",
        "take a model off the data path; it raises an `InvalidRouting` Warning and a",
        "line in `tidal status`. The label with another value than `true`",
        '(`enabled: "yes"`) opts nothing in; `tidal status` lists such Deployments.',
        "",
    ]


def _scaling() -> list[str]:
    lines = [
        "## Scaling and placement (read by the scaler)",
        "",
        row("annotation", "default", "allowed", "meaning"),
        row("---", "---", "---", "---"),
    ]
    for key in SCALING_KEYS:
        default = f"`{key.default}`" if key.default else "unset"
        lines.append(row(f"`{key.name}`", default, key.allowed, key.meaning))
    return lines


def _shapes() -> list[str]:
    lines = [
        "",
        "## GPU shapes",
        "",
        "The GPU shapes a model may run on, from the cluster's `tidal-shapes` table, and",
        "its container's arguments, environment and price on each ([shapes.md](shapes.md)).",
        "Tidal sizes the model on each shape, buys the cheapest mix that meets its demand",
        "([the mix](shapes.md#the-cheapest-mix-and-when-it-holds-still)) and runs each extra",
        "shape in a companion Deployment `<name>-<shape>`. Unlike the keys above, a bad shape",
        "key does not stop scaling: an `InvalidAnnotation` Warning names it and what is",
        "allowed, and the model scales on the shapes declared well",
        "([bad declarations](shapes.md#bad-declarations)).",
        "",
        row("annotation", "default", "allowed", "meaning"),
        row("---", "---", "---", "---"),
    ]
    for spec in SHAPE_SPECS:
        lines.append(row(f"`{spec.key}`", "unset", spec.allowed, spec.meaning))
    return lines


def _routing() -> list[str]:
    lines = [
        "",
        "## Routing (read by the activator)",
        "",
        row("annotation", "default", "allowed", "meaning"),
        row("---", "---", "---", "---"),
    ]
    return lines + _read_key_rows(ROUTING_KEYS)


def _pools() -> list[str]:
    lines = [
        "",
        "## InferencePools (read by the scaler)",
        "",
        'An `InferencePool` opts in with `autoscaling.tidal.dev/enabled: "true"` as a label',
        "or an annotation, and may carry every scaling and placement key above: the",
        "Deployment it selects is scaled, and where both carry a key the Deployment's",
        "value wins. Two more keys describe the pool's endpoint picker",
        "([gateway-api.md](gateway-api.md)):",
        "",
        row("annotation", "default", "allowed", "meaning"),
        row("---", "---", "---", "---"),
    ]
    return lines + _read_key_rows(POOL_KEYS)


def _read_key_rows(keys: Iterable[Key[Any]]) -> list[str]:
    """A row per key read with a default or a note on what unset means."""
    return [
        row(f"`{k.name}`", f"`{k.default}`" if k.default else k.default_note, k.allowed, k.meaning)
        for k in keys
    ]


def _written_by_tidal() -> list[str]:
    lines = [
        "",
        "## Written by Tidal",
        "",
        f"`{STATUS_ANNOTATION}`: JSON of the discrete state only (desired",
        "replicas, mode stable or panic, the spot/on-demand split, the reason and",
        "the time of the last change), written only when it changes; with an",
        "objective (`slo-ttft`) also `binding`, the phase (prefill or decode)",
        "whose work binds, and `nextReplica`, the share of requests one more",
        "replica would meet besides, as at that write",
        "([SLO-first scaling](slo-scaling.md)). Values that",
        "move every tick (observed signals, stable and panic averages) are",
        "served live by the scaler at `GET /v1/targets` and as metrics",
        "([metrics.md](metrics.md)).",
        "",
        "Events (core/v1, on the Deployment unless said otherwise, from component",
        "`tidal-scaler`):",
        "",
        row("reason", "type", "when"),
        row("---", "---", "---"),
    ]
    for event in EVENT_REASONS:
        kind = "Warning" if event.warning else "Normal"
        lines.append(row(f"`{event.reason}`", kind, event.when))
    return lines
