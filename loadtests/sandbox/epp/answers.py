"""What a client gets when flow control drops its request: the router's answers, one table.

The router turns a flow-control outcome into an error
(``translateFlowControlOutcome`` in ``pkg/epp/requestcontrol/admission.go``)
and Envoy sends it as an immediate response (``BuildErrResponse`` in
``pkg/common/error/error.go``): the status, a body ``inference error:
<Code> - <message>`` and the header ``x-llm-d-request-dropped-reason``.
The fake sends the same three things (llm-d/llm-d-router at ebab687927f5)::

    outcome                 status  reason header               body after "inference error: "
    EvictedNoEndpoints      503     rejected-no-endpoints       ServiceUnavailable - request timed
                                                                out in queue and no endpoints are
                                                                available: ...
    RejectedNoEndpoints     503     rejected-no-endpoints       ServiceUnavailable - no endpoints
                                                                available: ...
    EvictedTTL              429     rejected-ttl-expired        ResourceExhausted - request timed
                                                                out in queue: ...
    RejectedCapacity        429     rejected-saturated          ResourceExhausted - ...
    EvictedOther (shutdown) 503     rejected-shutting-down      ServiceUnavailable - flow
                                                                controller shutting down: ...

A 503 means no capacity exists (the pool is at zero), a 429 that capacity
exists but is contended: the split the router makes so that a client (and
a dashboard) can tell a cold pool from a busy one. A request whose client
left (``EvictedContextCancelled``) gets no answer: nobody waits for it.

A request dispatched to an endpoint that refuses the connection is
answered as Envoy answers it: 503 ``upstream connect error or
disconnect/reset before headers. reset reason: connection failure``.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.signals.epp_metrics import (
    EVICTED_NO_ENDPOINTS,
    EVICTED_OTHER,
    EVICTED_TTL,
    REJECTED_CAPACITY,
    REJECTED_NO_ENDPOINTS,
)

__all__ = ["DROPPED_REASON", "UPSTREAM_REFUSED", "Answer", "answer_for"]

DROPPED_REASON = "x-llm-d-request-dropped-reason"


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: str
    reason: str  # the dropped-reason header's value ("" for none)


_EVICTED = "request evicted from queue: request TTL expired"
_ANSWERS = {
    EVICTED_NO_ENDPOINTS: Answer(
        503,
        "inference error: ServiceUnavailable - request timed out in queue and no endpoints are "
        f"available: {_EVICTED}: no endpoints available",
        "rejected-no-endpoints",
    ),
    REJECTED_NO_ENDPOINTS: Answer(
        503,
        "inference error: ServiceUnavailable - no endpoints available: request rejected "
        "pre-queue: no endpoints available",
        "rejected-no-endpoints",
    ),
    EVICTED_TTL: Answer(
        429,
        f"inference error: ResourceExhausted - request timed out in queue: {_EVICTED}",
        "rejected-ttl-expired",
    ),
    REJECTED_CAPACITY: Answer(
        429,
        "inference error: ResourceExhausted - request rejected pre-queue: queue at capacity",
        "rejected-saturated",
    ),
    EVICTED_OTHER: Answer(
        503,
        "inference error: ServiceUnavailable - flow controller shutting down: request evicted "
        "from queue: flow controller is not running",
        "rejected-shutting-down",
    ),
}

UPSTREAM_REFUSED = Answer(
    503,
    "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
    "",
)


def answer_for(outcome: str) -> Answer:
    """The answer to a request that left flow control with ``outcome`` (not dispatched)."""
    found = _ANSWERS.get(outcome)
    if found is None:
        return Answer(
            500, f"inference error: Internal - unhandled flow control outcome: {outcome}", ""
        )
    return found
