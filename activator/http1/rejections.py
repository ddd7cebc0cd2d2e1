"""What the data path refuses as it reads a request: the client's own failures, one class each.

Each :class:`RequestRejected` subclass states its answer (status, error type,
code, message), and :mod:`activator.statuses` lists them in its table with
the rest; the exception's text is the detail the client is told. A
rejection is decided before any byte of the request reaches a replica, and
the connection closes after its answer: where the next request starts is in
doubt. :class:`BodyTooLarge` and :class:`BodyStalled` are a body's failures
while it is read or piped (413, 408).
"""

from __future__ import annotations

__all__ = [
    "REJECTIONS",
    "BadFraming",
    "BodyStalled",
    "BodyTooLarge",
    "HeadTimeout",
    "HeadTooLarge",
    "RequestRejected",
    "UnsupportedTransferEncoding",
    "UnsupportedVersion",
]


class BodyTooLarge(Exception):
    """The request body is over the limit (413)."""


class BodyStalled(Exception):
    """The client stopped sending its body for longer than the idle timeout (408)."""


class RequestRejected(Exception):
    """A request the data path refuses as it parses it: no byte of it reaches a replica.

    Each subclass states its answer (:mod:`activator.statuses` lists them in
    its table); the exception's text is the detail the client is told.
    """

    status = 400
    error_type = "invalid_request_error"
    code = "bad_request"
    message = "the request is not valid HTTP/1.1"


class BadFraming(RequestRejected):
    """Where the request (or its body) ends is in doubt: the connection closes after the answer."""

    code = "bad_framing"
    message = "the request's framing is invalid"


class HeadTooLarge(RequestRejected):
    status = 431
    code = "head_too_large"
    message = "the request head is over the limit"


class HeadTimeout(RequestRejected):
    status = 408
    error_type = "timeout_error"
    code = "head_timeout"
    message = "the request head was not complete within the head timeout"


class UnsupportedTransferEncoding(RequestRejected):
    status = 501
    code = "unsupported_transfer_encoding"
    message = "only Transfer-Encoding: chunked is supported"


class UnsupportedVersion(RequestRejected):
    status = 505
    code = "unsupported_http_version"
    message = "only HTTP/1.1 and HTTP/1.0 are supported"


# Every rejection, for the status table.
REJECTIONS: tuple[type[RequestRejected], ...] = (
    RequestRejected,
    BadFraming,
    HeadTooLarge,
    HeadTimeout,
    UnsupportedTransferEncoding,
    UnsupportedVersion,
)
