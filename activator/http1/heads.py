"""Message heads as bytes: the parsed request head, and the heads the proxy writes.

The data path never builds header dictionaries on the hot path: a request
head is a list of ``(name, value)`` byte pairs as the client sent them, plus
a lower-cased index for the few lookups the proxy makes. The heads it writes
are built by joining byte strings once.

Header hygiene (docs/activator-data-path.md) lives here, in one place each way:

- to the replica (:func:`upstream_request_head`): hop-by-hop headers out
  (RFC 9110 §7.6.1: the fixed list plus every token named in
  ``Connection``), ``Host`` set to the replica's address, the routing header
  ``X-Tidal-Target`` and ``Expect`` out (the proxy answers ``100 Continue``
  itself), ``X-Forwarded-For`` appended to, ``X-Forwarded-Proto`` and
  ``X-Forwarded-Host`` set unless the client sent them, ``X-Request-Id`` kept
  or added, and the body's framing stated by the proxy;
- to the client (:func:`client_response_head`): hop-by-hop headers out, the
  replica's ``Content-Length`` kept when the body is relayed as it came,
  ``Transfer-Encoding: chunked`` when the chunks are, ``X-Request-Id``
  added when the replica sent none, ``Connection`` as the client connection
  will behave.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http import HTTPStatus

__all__ = [
    "HOP_BY_HOP",
    "RequestHead",
    "client_response_head",
    "connection_tokens",
    "error_head_and_body",
    "upstream_request_head",
]

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
# Request headers the proxy sets itself (or must not pass on).
_SKIP_REQUEST = HOP_BY_HOP | {
    b"host",
    b"content-length",
    b"expect",
    b"x-forwarded-for",
    b"x-request-id",
}
_SKIP_RESPONSE = HOP_BY_HOP | {b"content-length"}
_CRLF = b"\r\n"

# The standard reason phrases (RFC 9110 §15), 413's by its RFC 9110 name.
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus} | {
    413: b"Content Too Large"
}


@dataclass(slots=True)
class RequestHead:
    """A parsed request head; header names and values as sent."""

    method: str
    target: str  # the raw request-target: "/v1/chat/completions?x=1"
    version: str  # "1.1" or "1.0"
    headers: list[tuple[bytes, bytes]]
    peer: str = ""
    keep_alive: bool = True
    # Lower-cased name -> value, the last one when repeated (lookups only).
    index: dict[bytes, bytes] = field(default_factory=dict)

    def get(self, name: bytes) -> bytes | None:
        """A header's value by lower-cased name."""
        return self.index.get(name)

    def text(self, name: bytes) -> str | None:
        value = self.index.get(name)
        return None if value is None else value.decode("latin-1")

    @property
    def content_length(self) -> int | None:
        value = self.index.get(b"content-length")
        return int(value) if value is not None else None

    @property
    def chunked(self) -> bool:
        value = self.index.get(b"transfer-encoding")
        return value is not None and value.lower().rstrip().endswith(b"chunked")

    @property
    def has_body(self) -> bool:
        return self.chunked or bool(self.content_length)

    @property
    def host(self) -> str | None:
        return self.text(b"host")


def connection_tokens(value: bytes | None) -> frozenset[bytes]:
    """The header names a ``Connection`` header marks hop-by-hop (lower-cased)."""
    if not value:
        return _NO_TOKENS
    if value in _NAMES_NO_HEADER:
        # "keep-alive" (hop-by-hop already) or "close" (no header of that
        # name), as nearly every peer sends: nothing more to drop.
        return _NO_TOKENS
    return frozenset(t.strip().lower() for t in value.split(b",") if t.strip())


_NO_TOKENS: frozenset[bytes] = frozenset()
# _SKIP_REQUEST plus a caller's ``strip`` set: callers pass the same one or
# two sets every time, so the union is built once, not per request.
_SKIP_WITH: dict[frozenset[bytes], frozenset[bytes]] = {}


def _skip_with(strip: frozenset[bytes]) -> frozenset[bytes]:
    if len(_SKIP_WITH) >= 64:
        _SKIP_WITH.clear()
    skip = _SKIP_WITH[strip] = _SKIP_REQUEST | strip
    return skip


_NAMES_NO_HEADER = frozenset({b"keep-alive", b"Keep-Alive", b"close", b"Close"})


def upstream_request_head(
    head: RequestHead,
    *,
    authority: bytes,
    request_id: bytes,
    body_length: int | None,
    chunked: bool,
    strip: frozenset[bytes] = frozenset(),
) -> bytes:
    """The request head for the replica (see the module docstring for the hygiene).

    ``strip``: more lower-cased header names to leave out (the routing header).
    """
    skip = _SKIP_REQUEST
    if strip:
        skip = _SKIP_WITH.get(strip) or _skip_with(strip)
    tokens = connection_tokens(head.index.get(b"connection"))
    if tokens:
        skip = skip | tokens
    parts = [
        f"{head.method} {head.target} HTTP/1.1\r\nHost: ".encode("latin-1"),
        authority,
        _CRLF,
    ]
    append = parts.append
    for name, value in head.headers:
        if name.lower() not in skip:
            append(name + b": " + value + _CRLF)
    prior = head.index.get(b"x-forwarded-for")
    peer = head.peer.encode("latin-1")
    append(b"X-Forwarded-For: " + (prior + b", " + peer if prior else peer) + _CRLF)
    if b"x-forwarded-proto" not in head.index:
        append(b"X-Forwarded-Proto: http\r\n")
    host = head.index.get(b"host")
    if b"x-forwarded-host" not in head.index and host:
        append(b"X-Forwarded-Host: " + host + _CRLF)
    append(b"X-Request-Id: " + request_id + _CRLF)
    if chunked:
        append(b"Transfer-Encoding: chunked\r\n")
    elif body_length is not None:
        append(b"Content-Length: %d\r\n" % body_length)
    append(_CRLF)
    return b"".join(parts)


def client_response_head(
    status: int,
    reason: bytes,
    headers: list[tuple[bytes, bytes]],
    *,
    request_id: bytes,
    content_length: int | None,
    chunked: bool,
    close: bool,
    http10: bool,
) -> bytes:
    """The response head for the client (see the module docstring for the hygiene)."""
    has_id = False
    parts = [b"HTTP/1.1 %d " % status, reason, _CRLF]
    append = parts.append
    named: frozenset[bytes] = _NO_TOKENS  # names a Connection header marks hop-by-hop
    for name, value in headers:
        lower = name.lower()
        if lower in _SKIP_RESPONSE:
            if lower == b"connection":
                tokens = connection_tokens(value)
                if tokens:
                    named = named | tokens
            continue
        if lower == b"x-request-id":
            has_id = True
        append(name + b": " + value + _CRLF)
    if named:
        # Rare: a Connection header names other headers. They go too,
        # wherever they came (before or after it): a second pass.
        parts = [b"HTTP/1.1 %d " % status, reason, _CRLF]
        append = parts.append
        has_id = False
        for name, value in headers:
            lower = name.lower()
            if lower in _SKIP_RESPONSE or lower in named:
                continue
            if lower == b"x-request-id":
                has_id = True
            append(name + b": " + value + _CRLF)
    if not has_id:
        append(b"X-Request-Id: " + request_id + _CRLF)
    if content_length is not None:
        append(b"Content-Length: %d\r\n" % content_length)
    elif chunked:
        append(b"Transfer-Encoding: chunked\r\n")
    if close:
        append(b"Connection: close\r\n")
    elif http10:
        append(b"Connection: keep-alive\r\n")
    append(_CRLF)
    return b"".join(parts)


def error_head_and_body(
    status: int,
    *,
    error_type: str,
    code: str,
    message: str,
    request_id: bytes,
    retry_after_s: int | None,
    close: bool,
    http10: bool,
) -> bytes:
    """One of the activator's own answers: the OpenAI error shape as JSON (docs/statuses.md)."""
    body = json.dumps({"error": {"message": message, "type": error_type, "code": code}}).encode()
    headers = [(b"Content-Type", b"application/json")]
    if retry_after_s is not None:
        headers.append((b"Retry-After", str(retry_after_s).encode()))
    elif status == 503:
        # A 503 that names no time to retry is one waiting does not help
        # (not_woken); OpenAI's clients would otherwise retry it twice.
        headers.append((b"x-should-retry", b"false"))
    head = client_response_head(
        status,
        _REASONS[status],
        headers,
        request_id=request_id,
        content_length=len(body),
        chunked=False,
        close=close,
        http10=http10,
    )
    return head + body
