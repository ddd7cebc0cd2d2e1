"""What the scaler says on a Deployment: every Event reason, and a change's reason and message.

Every change of a target's scale is recorded as a Kubernetes Event on its
Deployment whose reason is one of ``Activated``, ``ScaledUp``,
``ScaledDown``, ``ScaledToZero``; :data:`EVENT_REASONS` lists these and every
other reason the scaler raises (problems, placement, the warm tier), with
its type and when it comes. Code that raises an Event names its reason with
a constant from here, and ``docs/annotations.md`` lists the table, so the
reference cannot miss one.

Main decision: the reason names what actually happened, not what the policy
hoped for. A decision whose own reason is a change (``ScaledUp``...) keeps
it; any other (``Steady``, ``NoData``, ``Holding``) that still moved the
scale, because the scale was changed under us, is named by the direction of
the move, and a move to zero is always ``ScaledToZero``.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.api import Decision, Reason

__all__ = [
    "ADAPTER_LOAD_REFUSED",
    "CHANGE_REASONS",
    "EVENT_REASONS",
    "INVALID_ANNOTATION",
    "INVALID_ROUTING",
    "MOVED",
    "NO_DEPLOYMENT_SELECTED",
    "ON_DEMAND_PINNED",
    "SEVERAL_DEPLOYMENTS_SELECTED",
    "SHAPES_CHANGED",
    "SHAPE_RECOVERED",
    "SHAPE_UNAVAILABLE",
    "SLEEP_MODE_UNAVAILABLE",
    "SLEPT",
    "SPOT_FALLBACK",
    "SPOT_RECOVERED",
    "UNKNOWN_ANNOTATION",
    "WAITING_ROOM_TOO_SHORT",
    "WAKE_FAILED",
    "WOKE",
    "WRITES_FAILING",
    "EventReason",
    "change_message",
    "change_reason",
]

CHANGE_REASONS = frozenset(
    {Reason.ACTIVATED, Reason.SCALED_UP, Reason.SCALED_DOWN, Reason.SCALED_TO_ZERO}
)
INVALID_ANNOTATION = "InvalidAnnotation"
INVALID_ROUTING = "InvalidRouting"
UNKNOWN_ANNOTATION = "UnknownAnnotation"
WRITES_FAILING = "WritesFailing"
SPOT_FALLBACK = "SpotFallback"
SPOT_RECOVERED = "SpotRecovered"
ON_DEMAND_PINNED = "OnDemandPinned"
SLEPT = "Slept"
MOVED = "Moved"
WOKE = "Woke"
WAKE_FAILED = "WakeFailed"
SLEEP_MODE_UNAVAILABLE = "SleepModeUnavailable"
ADAPTER_LOAD_REFUSED = "AdapterLoadRefused"
SHAPE_UNAVAILABLE = "ShapeUnavailable"
SHAPE_RECOVERED = "ShapeRecovered"
SHAPES_CHANGED = "ShapesChanged"
# On an InferencePool (docs/gateway-api.md).
NO_DEPLOYMENT_SELECTED = "NoDeploymentSelected"
SEVERAL_DEPLOYMENTS_SELECTED = "SeveralDeploymentsSelected"
WAITING_ROOM_TOO_SHORT = "WaitingRoomTooShort"


@dataclass(frozen=True, slots=True)
class EventReason:
    """One Event reason as the reference lists it."""

    reason: str
    warning: bool
    when: str


#: Every Event reason the scaler raises on a Deployment (or, said so, on an InferencePool),
#: in the reference's order.
EVENT_REASONS: tuple[EventReason, ...] = (
    EventReason(Reason.ACTIVATED.value, False, "woken from zero by a request"),
    EventReason(Reason.SCALED_UP.value, False, "more replicas"),
    EventReason(Reason.SCALED_DOWN.value, False, "fewer replicas, not zero"),
    EventReason(Reason.SCALED_TO_ZERO.value, False, "idle past the grace period: zero replicas"),
    EventReason(
        INVALID_ANNOTATION,
        True,
        "an `autoscaling.tidal.dev/` or `placement.tidal.dev/` annotation is invalid (each key,"
        " value and what is allowed); the scale is left alone and requests held for the model"
        " are answered 503 `not_woken` until it is fixed. A bad GPU shape key"
        " (`placement.tidal.dev/shapes` and its overrides) is the exception: the model scales"
        " on the shapes declared well",
    ),
    EventReason(
        UNKNOWN_ANNOTATION,
        True,
        "a key under `autoscaling.tidal.dev/` or `placement.tidal.dev/` is not one Tidal reads"
        " (a typo?): named with the closest known key and ignored; scaling goes on with the"
        " keys that are known",
    ),
    EventReason(
        INVALID_ROUTING,
        True,
        "a `routing.tidal.dev/` annotation is unknown or invalid; the activator uses the"
        " default meanwhile, scaling goes on",
    ),
    EventReason(
        WRITES_FAILING,
        True,
        "three writes in a row failed (other than a conflict); retried with backoff",
    ),
    EventReason(
        ON_DEMAND_PINNED,
        False,
        "spot placement: the Deployment is pinned to on-demand capacity (a one-time rollout)",
    ),
    EventReason(
        SPOT_FALLBACK, True, "on-demand replicas cover spot ones that do not serve, and why"
    ),
    EventReason(SPOT_RECOVERED, False, "spot serves again: the on-demand cover is released"),
    EventReason(
        SHAPES_CHANGED,
        False,
        "GPU shapes: the model's replicas move to another mix of shapes (the mix, its hourly"
        " cost, and the one before)",
    ),
    EventReason(
        SHAPE_UNAVAILABLE,
        True,
        "GPU shapes: replicas of a shape stayed Pending past the pending-timeout; the shape is"
        " capped at what it has, the next cheapest covers, and when it is asked for again",
    ),
    EventReason(SHAPE_RECOVERED, False, "GPU shapes: a capped shape serves again"),
    EventReason(SLEPT, False, "warm tier: an idle replica sleeps"),
    EventReason(
        MOVED,
        False,
        "warm tier: a sleeping replica moves off a GPU that holds only sleepers (its pod "
        "template prefers a node whose GPU serves; the rollout starts a replacement there)",
    ),
    EventReason(WOKE, False, "warm tier: a sleeping replica woke, and how long it took"),
    EventReason(WAKE_FAILED, True, "warm tier: waking a replica failed; a new one starts"),
    EventReason(
        SLEEP_MODE_UNAVAILABLE,
        True,
        "warm tier: `sleep-after` is set but the model server has no sleep mode (vLLM needs"
        " `VLLM_SERVER_DEV_MODE=1` and `--enable-sleep-mode`); its replicas stay awake",
    ),
    EventReason(
        NO_DEPLOYMENT_SELECTED,
        True,
        "on an InferencePool: its selector matches the pod template of no Deployment in its"
        " namespace; nothing is scaled for it",
    ),
    EventReason(
        SEVERAL_DEPLOYMENTS_SELECTED,
        True,
        "on an InferencePool: its selector matches several Deployments, or one that another"
        " opted-in pool selects too (the message names them); none is scaled for it",
    ),
    EventReason(
        WAITING_ROOM_TOO_SHORT,
        True,
        "on an InferencePool: its endpoint picker's `noEndpointRequestTTL` is shorter than the"
        " model's cold start, so a request that wakes it from zero is evicted (503) first",
    ),
    EventReason(
        ADAPTER_LOAD_REFUSED,
        True,
        "a replica refused to load a LoRA adapter (the message names the replica, the adapter"
        " and its answer); the activator sends that adapter's requests elsewhere for a minute,"
        " and answers them 503 at once when no replica is left to ask. Also raised, at most once"
        " a minute, when no replica of the model can load adapters at all (none publishes LoRA"
        " support): the message names --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING",
    ),
)


def change_reason(decision: Decision, before: int) -> Reason:
    """The Event reason for moving from ``before`` replicas to ``decision.desired``."""
    if decision.reason in CHANGE_REASONS:
        return decision.reason
    if decision.desired == 0:
        return Reason.SCALED_TO_ZERO
    return Reason.SCALED_UP if decision.desired > before else Reason.SCALED_DOWN


def change_message(decision: Decision, before: int) -> str:
    """The Event message: from -> to, then the policy's own explanation."""
    message = f"scaled from {before} to {decision.desired}"
    if decision.message:
        message += f": {decision.message}"
    return message
