"""The annotations that matter only for an InferencePool target (``autoscaling.tidal.dev/*``).

An ``InferencePool`` opts in with ``autoscaling.tidal.dev/enabled: "true"``
(label or annotation) and may carry every scaling and placement key of
:mod:`groundwork.rules.scaling_keys` (docs/gateway-api.md says which wins
when its Deployment carries one too). These two more tell the scaler about
the pool's endpoint picker (EPP), which it reads as a signal source:

- where the EPP serves its metrics (by default its Service, named by the
  pool's ``endpointPickerRef``, on the router's metrics port 9090);
- the EPP's ``flowControl.noEndpointRequestTTL``: how long a request waits
  in the EPP while the pool has no ready endpoint. The scaler cannot read
  it from the EPP (it is in the EPP's own configuration, not in its
  metrics), so it is said here, and the scaler warns when it is shorter
  than the model's cold start. Unset, it is the router's default: 60 s
  (it follows ``defaultRequestTTL``, whose default is 60 s).

Only the scaler reads these (the activator is not in a pool's path).
"""

from __future__ import annotations

from typing import Any

from groundwork.rules.annotation_keys import Key
from groundwork.rules.scaling_keys import AUTOSCALING_PREFIX
from groundwork.rules.values import HTTP_URL, duration_in

__all__ = [
    "DEFAULT_EPP_METRICS_PORT",
    "EPP_METRICS_URL",
    "EPP_NO_ENDPOINT_TTL",
    "POOL_KEYS",
    "ROUTER_DEFAULT_NO_ENDPOINT_TTL_S",
]

#: The router's metrics port (its ``--metrics-port`` default).
DEFAULT_EPP_METRICS_PORT = 9090
#: The router's ``noEndpointRequestTTL`` when its config sets none: ``defaultRequestTTL``'s 60 s.
ROUTER_DEFAULT_NO_ENDPOINT_TTL_S = 60.0

EPP_METRICS_URL = Key(
    AUTOSCALING_PREFIX + "epp-metrics-url",
    HTTP_URL,
    "",
    "an http or https URL",
    "InferencePool: where its endpoint picker serves its metrics",
    default_note="`http://<endpointPickerRef.name>.<namespace>.svc:9090/metrics`",
)
EPP_NO_ENDPOINT_TTL = Key(
    AUTOSCALING_PREFIX + "epp-no-endpoint-request-ttl",
    duration_in(0.0, 24 * 3600.0),
    "60s",
    "0s to 24h (`0s`: no limit)",
    "InferencePool: its endpoint picker's `flowControl.noEndpointRequestTTL`, how long a"
    " request waits while the pool has no ready endpoint; a `WaitingRoomTooShort` Warning"
    " says when it is shorter than the model's cold start",
)

#: Every pool key, in the order of docs/annotations.md.
POOL_KEYS: tuple[Key[Any], ...] = (EPP_METRICS_URL, EPP_NO_ENDPOINT_TTL)
