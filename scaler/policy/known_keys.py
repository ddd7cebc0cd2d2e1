"""The annotation keys the scaler knows, and a warning for each of ours it does not.

**A typo in a key warns; a bad value refuses.** An unknown
``autoscaling.tidal.dev/*`` or ``placement.tidal.dev/*`` key
(:func:`unknown_keys`) is named with the closest known key ("did you mean
``max-scale``?", by difflib's ratio) and ignored: it cannot make a scale
unsafe, and refusing the whole Deployment for it would answer every request
at zero with a 503. A bad *value* of a known key still rejects the config
(:mod:`scaler.policy.annotations`): the user asked for something Tidal
cannot honour. ``autoscaling.tidal.dev/status`` (written by Tidal),
``autoscaling.tidal.dev/enabled`` (the opt-in label, sometimes copied into
annotations) and ``placement.tidal.dev/on-demand-pin`` (written by Tidal
when it pins the Deployment to on-demand capacity) are known.
``routing.tidal.dev/*`` belongs to the activator and is not judged here.
"""

from __future__ import annotations

from collections.abc import Mapping

from groundwork.rules.annotation_keys import Problem as AnnotationProblem
from groundwork.rules.annotation_keys import unknown_key_problems
from groundwork.rules.pool_keys import POOL_KEYS
from groundwork.rules.scaling_keys import AUTOSCALING_PREFIX, PLACEMENT_PREFIX, SCALING_KEYS

__all__ = ["KNOWN_KEYS", "STATUS_ANNOTATION", "unknown_keys"]

STATUS_ANNOTATION = AUTOSCALING_PREFIX + "status"
_ENABLED = AUTOSCALING_PREFIX + "enabled"

#: Every key the scaling config reads (:mod:`scaler.policy.annotations`), and the
#: InferencePool keys (:mod:`scaler.policy.pool_annotations`).
KNOWN_KEYS: tuple[str, ...] = tuple(key.name for key in (*SCALING_KEYS, *POOL_KEYS))


# Written by Tidal: the status, and the record of the on-demand pin (policy.companion).
_ALLOWED_UNREAD = frozenset({STATUS_ANNOTATION, _ENABLED, PLACEMENT_PREFIX + "on-demand-pin"})


def unknown_keys(annotations: Mapping[str, str]) -> tuple[AnnotationProblem, ...]:
    """Every ``autoscaling.tidal.dev/*`` or ``placement.tidal.dev/*`` key the scaler does not
    read, each with the closest known key. They are warnings: scaling goes on with the keys
    that are known (:func:`~scaler.policy.annotations.parse_scaling_config` ignores these)."""
    return unknown_key_problems(
        annotations,
        prefixes=(AUTOSCALING_PREFIX, PLACEMENT_PREFIX),
        known=KNOWN_KEYS,
        also_known=_ALLOWED_UNREAD,
    )
