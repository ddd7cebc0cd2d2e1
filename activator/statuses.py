"""What the activator answers itself, and when: the exceptions, the status table, the decisions.

Every failure the activator answers itself is an exception, and
:data:`ERROR_STATUS` is the one table that turns exceptions into statuses,
each with a JSON body in the OpenAI error shape (docs/statuses.md):

=====================  ======  ============================================
exception              status  when
=====================  ======  ============================================
NoTarget, GateClosed    404    no target matches (or it was removed); an
                               unknown ``model`` is named, with those served
NoAdapter,              404    an unknown ``model`` where LoRA adapters are
AdapterWithdrawn               declared: the message names the declared ones
                               (AdapterWithdrawn: held for an adapter whose
                               declaration was removed meanwhile)
InvalidJson             400    the body, read for ``model``, is not JSON (the
                               parser's message and position, e.g. single
                               quotes or an unclosed bracket)
BodyNotObject           400    the body is JSON but not an object
BadModel                400    the object has no ``model``, or it is not a
                               non-empty string (what it is, is said)
BodyStalled             408    the client stalled its body past the idle timeout
BodyTooLarge            413    body over the limit
BufferFull              503    ``max_buffered`` requests already held, none
                               of which a newcomer may displace
Shed                    503    displaced at ``max_buffered`` by a higher
                               class or a lighter tenant, or sheddable and
                               refused while no replica is ready
                               (``routing.tidal.dev/shed-at-zero``); the
                               message names which
HeldBodiesFull          503    held request bodies reached the activator's cap
Draining, DrainEnded    503    shutting down (DrainEnded: still held when
                               the drain timeout ended)
ColdStartTimeout        504    no replica ready within the cold-start timeout
AdapterLoadFailed       503    every ready replica refused to load the LoRA
                               adapter (what the last one said is given),
                               answered as soon as none is left to ask
LoraUnsupported         503    no ready replica can load LoRA adapters at all
                               (none publishes LoRA support) and none is
                               starting: names ``--enable-lora`` and
                               ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``; no
                               ``Retry-After``
NotWoken                503    Tidal will not wake the model: its
                               ``autoscaling.tidal.dev/`` annotations are
                               invalid (the message names the Deployment and
                               each bad annotation); no ``Retry-After``
AllRefused              502    timed out after every replica tried refused
UpstreamFailed          502    bytes reached a replica that then failed
RefusedRequest          400    absolute-form target (not a forward proxy)
ConnectRefused          405    CONNECT (not a tunnel)
DeniedEndpoint          403    a replica's development endpoint (``denylist``)
RequestRejected         400    not valid HTTP/1.1, or no ``Host`` in HTTP/1.1
BadFraming              400    where the request ends is in doubt: both
                               Content-Length and Transfer-Encoding, either
                               repeated, a malformed chunk, TE in HTTP/1.0
HeadTooLarge            431    a request line, header line or whole head
                               over its limit
HeadTimeout             408    the head not complete within the head timeout
UnsupportedTransfer...  501    a Transfer-Encoding other than ``chunked``
UnsupportedVersion      505    neither HTTP/1.1 nor HTTP/1.0
=====================  ======  ============================================

The rejections (the last six rows) are decided as the request is parsed,
before anything reaches a replica, and close the connection after the
answer: the next request's start would be in doubt.

503s carry ``Retry-After``, one second by default, and for a request
refused while its model wakes the expected time left to a ready replica
(:mod:`activator.holding.wake_clock`); except ``not_woken`` and
``lora_unsupported``: nobody knows when an operator will fix the annotation
or the model server's flags, so they say ``x-should-retry: false``
instead (the header OpenAI's clients obey; they would retry it twice). Why
503 for it: the client's request is fine (a 4xx would tell it to change the
request); nothing timed out and waiting does not help (not a 504); no
replica answered badly (not a 502); the model is unavailable on the server's
side until its configuration is fixed, and the first request after the fix
wakes it, which is what 503 says. The body names the Deployment and the
annotation, so whoever sees the error knows what to fix.

Nothing here parses HTTP: the data path's own failures (a body stalled or
over the limit, a request refused as it was parsed) are its exceptions,
answered by this table as they are, one class each. The proxy classifies a failed exchange
with a replica as :class:`Failure` ``NOT_SENT`` (refused, unreachable,
connect timeout: no byte reached the replica), ``UNANSWERED`` (the request
went out and the replica closed or reset the connection before a byte of
answer) or ``SENT``, notes whether the client's own body failed while it was
streamed, and :func:`after_failure` decides: the client's body failure wins
(408/413, whatever the replica did), a ``NOT_SENT`` failure sends the
request back to waiting, an ``UNANSWERED`` one too when the request can be
sent again (its body is still at hand, and it was not sent again before),
anything else is a 502. The same table and decision survive a change of
HTTP plumbing.

Why ``UNANSWERED`` is sent again, although bytes went out: a server closes
a keep-alive connection when it has been idle, or at shutdown (uvicorn, so
vLLM, closes every idle one at SIGTERM, which is how the scaler removes a
replica), and a request written as it closes is never read: without a
second attempt, every scale-down could turn such a request into a 502. A
replica that died while generating an answer it had not begun to send gives
the same signal; sending that request again costs one more generation,
never a side effect (inference has none), and happens once, so a request
that kills replicas kills at most two. RFC 9110 §9.2.2 lets a proxy resend
a non-idempotent request only where configuration says it is idempotent:
the per-model annotation ``routing.tidal.dev/resend-unanswered`` (default
``true``) is that configuration; with ``false`` such a request is a 502.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from activator.holding.held_bodies import HeldBodiesFull
from activator.holding.hold_errors import (
    AdapterLoadFailed,
    AdapterWithdrawn,
    BufferFull,
    ColdStartTimeout,
    DrainEnded,
    GateClosed,
    LoraUnsupported,
    Shed,
)
from activator.http1.rejections import REJECTIONS, BodyStalled, BodyTooLarge
from activator.scaler_link.wake_refusal import NotWoken

__all__ = [
    "ERROR_STATUS",
    "AdapterLoadFailed",
    "AdapterWithdrawn",
    "AllRefused",
    "BadBody",
    "BadModel",
    "BodyNotObject",
    "BodyStalled",
    "BodyTooLarge",
    "ConnectRefused",
    "DeniedEndpoint",
    "Draining",
    "ErrorStatus",
    "Failure",
    "HeldBodiesFull",
    "InvalidJson",
    "LoraUnsupported",
    "NoAdapter",
    "NoTarget",
    "ProxyError",
    "RefusedRequest",
    "UpstreamFailed",
    "after_failure",
    "error_document",
    "status_of",
]


class ProxyError(Exception):
    """A request the activator answers itself."""


class NoTarget(ProxyError):
    pass


class NoAdapter(ProxyError):
    """A ``model`` no target serves, where some target declares LoRA adapters."""


class BadBody(ProxyError):
    """A body the activator must read for ``model`` and cannot; ``detail`` says why."""

    @property
    def detail(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidJson(BadBody):
    """The body is not JSON; ``detail`` is the parser's words and position."""


class BodyNotObject(BadBody):
    """The body is JSON, but not an object."""


class BadModel(BadBody):
    """The body is a JSON object without a non-empty ``model`` string."""


class Draining(ProxyError):
    pass


class AllRefused(ProxyError):
    pass


class UpstreamFailed(ProxyError):
    pass


class RefusedRequest(ProxyError):
    pass


class ConnectRefused(ProxyError):
    pass


class DeniedEndpoint(ProxyError):
    """A client asked for a replica endpoint only Tidal may call.

    The paths are :mod:`activator.replicas.denylist`'s.
    """


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    status: int
    type: str
    code: str  # also the metrics' rejection reason
    message: str
    retry_after: bool = False


ERROR_STATUS: dict[type[Exception], ErrorStatus] = {
    NoTarget: ErrorStatus(404, "not_found_error", "no_target", "no target matches this request"),
    GateClosed: ErrorStatus(404, "not_found_error", "no_target", "the target was removed"),
    NoAdapter: ErrorStatus(
        404, "not_found_error", "no_adapter", "no declared LoRA adapter has this name"
    ),
    AdapterWithdrawn: ErrorStatus(
        404, "not_found_error", "no_adapter", "no declared LoRA adapter has this name"
    ),
    AdapterLoadFailed: ErrorStatus(
        503,
        "unavailable_error",
        "adapter_load_failed",
        "no replica could load this LoRA adapter",
        retry_after=True,
    ),
    LoraUnsupported: ErrorStatus(
        503,
        "unavailable_error",
        "lora_unsupported",
        "this model's replicas cannot load LoRA adapters",
    ),
    InvalidJson: ErrorStatus(400, "invalid_request_error", "invalid_json", "the body is not JSON"),
    BodyNotObject: ErrorStatus(
        400,
        "invalid_request_error",
        "body_not_object",
        "the body must be a JSON object ({...}) with a 'model'",
    ),
    BadModel: ErrorStatus(
        400,
        "invalid_request_error",
        "bad_model",
        "the body's 'model' must be a non-empty string naming the model (GET /v1/models lists "
        "them)",
    ),
    BodyStalled: ErrorStatus(
        408,
        "timeout_error",
        "body_timeout",
        "the client stopped sending the request body for longer than the idle timeout",
    ),
    BodyTooLarge: ErrorStatus(
        413, "invalid_request_error", "body_too_large", "the request body is over the limit"
    ),
    BufferFull: ErrorStatus(
        503,
        "overloaded_error",
        "buffer_full",
        "too many requests are waiting for this model",
        retry_after=True,
    ),
    Shed: ErrorStatus(
        503,
        "overloaded_error",
        "shed",
        "the request was shed",
        retry_after=True,
    ),
    HeldBodiesFull: ErrorStatus(
        503,
        "overloaded_error",
        "held_bodies_full",
        "the activator holds too many request bodies already",
        retry_after=True,
    ),
    Draining: ErrorStatus(
        503, "unavailable_error", "draining", "the activator is shutting down", retry_after=True
    ),
    DrainEnded: ErrorStatus(
        503,
        "unavailable_error",
        "draining",
        "the activator shut down before a replica became ready",
        retry_after=True,
    ),
    ColdStartTimeout: ErrorStatus(
        504, "timeout_error", "cold_start_timeout", "no replica became ready in time"
    ),
    NotWoken: ErrorStatus(
        503,
        "unavailable_error",
        "not_woken",
        "Tidal will not wake this model until its annotations are fixed",
    ),
    AllRefused: ErrorStatus(
        502, "upstream_error", "all_refused", "every ready replica refused the connection"
    ),
    UpstreamFailed: ErrorStatus(
        502, "upstream_error", "upstream_failed", "the replica failed while handling the request"
    ),
    RefusedRequest: ErrorStatus(
        400,
        "invalid_request_error",
        "refused_request",
        "absolute-form request targets are refused: this is not a forward proxy",
    ),
    ConnectRefused: ErrorStatus(
        405, "invalid_request_error", "refused_request", "CONNECT is refused: this is not a tunnel"
    ),
    DeniedEndpoint: ErrorStatus(
        403,
        "permission_error",
        "denied_endpoint",
        "this endpoint of the model server is not open to clients",
    ),
    # What the data path refuses as it parses a request (each class states its row).
    **{cls: ErrorStatus(cls.status, cls.error_type, cls.code, cls.message) for cls in REJECTIONS},
}


def status_of(exc: Exception) -> ErrorStatus:
    """The table's row for ``exc``; anything unlisted is an upstream failure (502)."""
    return ERROR_STATUS.get(type(exc)) or ERROR_STATUS[UpstreamFailed]


def error_document(exc: Exception, detail: str = "") -> dict[str, Any]:
    """The JSON body for ``exc``, in the OpenAI error shape (an exception that carries
    its own ``detail``, as :class:`NotWoken` does, adds it when no other is given)."""
    spec = status_of(exc)
    detail = detail or str(getattr(exc, "detail", ""))
    message = spec.message + (f": {detail}" if detail else "")
    return {"error": {"message": message, "type": spec.type, "code": spec.code}}


class Failure(enum.Enum):
    """How an exchange with a replica failed, as far as retrying is concerned."""

    NOT_SENT = "not_sent"  # refused, unreachable, connect timeout: no byte reached it
    UNANSWERED = "unanswered"  # it went out; closed or reset before a byte of answer
    SENT = "sent"  # bytes went out, then the exchange failed


def after_failure(
    failure: Failure,
    *,
    client_body: BodyStalled | BodyTooLarge | None,
    replica: str,
    what: str,
    can_send_again: bool = False,
) -> Exception | None:
    """The answer after a failed exchange with ``replica``; None: go back to waiting.

    ``client_body`` is the client's own failure while its body was streamed
    (:class:`BodyStalled` or :class:`BodyTooLarge`), if any: it is the cause,
    so it is the answer, whatever the replica then did. ``can_send_again``:
    the whole body is still at hand and the request was not sent again
    before (only asked for an ``UNANSWERED`` failure). ``what`` names the
    replica-side error for the 502's message.
    """
    if client_body is not None:
        return client_body
    if failure is Failure.NOT_SENT:
        return None
    if failure is Failure.UNANSWERED and can_send_again:
        return None
    return UpstreamFailed(f"{replica}: {what}")
