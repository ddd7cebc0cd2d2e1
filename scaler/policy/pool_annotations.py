"""An InferencePool target's annotations: the pool's and its Deployment's, and the picker's keys.

A pool target is a Deployment an opted-in ``InferencePool`` selects
(docs/gateway-api.md). Both objects may carry Tidal's annotations; the
scaler reads one set, made here:

- **The Deployment wins, key by key** (:func:`merge`). The pool's
  ``autoscaling.tidal.dev/*`` and ``placement.tidal.dev/*`` keys fill in
  what the Deployment does not say. The Deployment is the object scaled,
  and a key on it is already what every other reader of it sees (``tidal
  status``, an activator that still routes to it, a person reading the
  Deployment); so a Deployment tuned before a pool was put in front of it
  keeps its behaviour, and the pool holds the defaults of the team that
  owns the gateway. ``routing.tidal.dev/*`` keys are not taken from the
  pool: they configure Tidal's activator, which is not in a pool's path.
- **Where each value came from** is kept (:attr:`Merged.from_pool`), so a
  problem is reported on the object that carries the bad value.
- **The picker's keys** (:mod:`groundwork.rules.pool_keys`):
  :func:`read_picker` reads where the endpoint picker serves its metrics
  (by default its Service, named by the pool's ``endpointPickerRef``, on
  port 9090) and its ``noEndpointRequestTTL`` (by default the router's
  60 s), with the same grammar and problems as every other key.

:data:`AWAKE_LABEL` is the pod label a pool selects on to let the warm tier
take sleeping replicas out of the picker's rotation
(:mod:`scaler.targets.awake_labels`). :func:`waiting_room_too_short` is the
rule of the ``WaitingRoomTooShort`` Warning: a request that wakes the model
from zero waits in the picker for the cold start, and is evicted (503) if
the picker's budget ends first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from groundwork.rules.annotation_keys import KeyReader, Problem
from groundwork.rules.pool_keys import (
    DEFAULT_EPP_METRICS_PORT,
    EPP_METRICS_URL,
    EPP_NO_ENDPOINT_TTL,
    ROUTER_DEFAULT_NO_ENDPOINT_TTL_S,
)
from groundwork.rules.scaling_keys import AUTOSCALING_PREFIX, PLACEMENT_PREFIX

__all__ = [
    "AWAKE_LABEL",
    "MERGED_PREFIXES",
    "Merged",
    "PickerConfig",
    "merge",
    "read_picker",
    "waiting_room_too_short",
]

#: A pod label the scaler keeps "true" while the replica is awake and "false" while the
#: warm tier has it asleep (or going to sleep, or waking), on the pods of a pool whose
#: selector requires it: the picker then routes to awake replicas only.
AWAKE_LABEL = AUTOSCALING_PREFIX + "awake"

#: The prefixes of the keys a pool lends its Deployment.
MERGED_PREFIXES = (AUTOSCALING_PREFIX, PLACEMENT_PREFIX)
# The opt-in and the status are each object's own, never lent.
_OWN = frozenset({AUTOSCALING_PREFIX + "enabled", AUTOSCALING_PREFIX + "status"})


@dataclass(frozen=True, slots=True)
class Merged:
    """The annotations the scaler reads for a pool target, and the keys whose value is
    the pool's."""

    annotations: Mapping[str, str]
    from_pool: frozenset[str]


def merge(pool: Mapping[str, str], deployment: Mapping[str, str]) -> Merged:
    """The Deployment's annotations with the pool's Tidal keys under them (module docstring)."""
    lent = {
        key: value
        for key, value in pool.items()
        if key.startswith(MERGED_PREFIXES) and key not in _OWN and key not in deployment
    }
    return Merged({**deployment, **lent}, frozenset(lent))


@dataclass(frozen=True, slots=True)
class PickerConfig:
    """What the scaler needs of a pool's endpoint picker."""

    metrics_url: str | None  # None: the pool names no picker Service and no URL is given
    no_endpoint_ttl_s: float  # 0: no limit
    ttl_said: bool  # the annotation gives it (else: the router's default)


def read_picker(
    annotations: Mapping[str, str], *, namespace: str, picker: tuple[str, int] | None
) -> tuple[PickerConfig, tuple[Problem, ...]]:
    """The picker's settings from a pool target's (merged) annotations and the pool's
    ``endpointPickerRef`` (``picker``: its Service's name and port); the problems found."""
    r = KeyReader(annotations)
    url = r.get(EPP_METRICS_URL)
    if url is None and picker is not None:
        # The ref's port is the picker's ext_proc port (9002); its metrics are on another.
        url = f"http://{picker[0]}.{namespace}.svc:{DEFAULT_EPP_METRICS_PORT}/metrics"
    ttl = r.get(EPP_NO_ENDPOINT_TTL)
    config = PickerConfig(
        metrics_url=url,
        no_endpoint_ttl_s=ROUTER_DEFAULT_NO_ENDPOINT_TTL_S if ttl is None else ttl,
        ttl_said=ttl is not None,
    )
    return config, tuple(r.problems)


def waiting_room_too_short(*, no_endpoint_ttl_s: float, cold_start_s: float) -> bool:
    """Whether a request that wakes the model from zero is evicted by the picker before
    the cold start ends (a TTL of 0 sets no limit)."""
    return 0 < no_endpoint_ttl_s < cold_start_s
