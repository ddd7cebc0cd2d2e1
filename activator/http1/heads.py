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
    "REQUEST_SKIP",
    "RequestHead",
    "client_response_head",
    "connection_tokens",
    "error_head_and_body",
    "forward_lines",
    "response_head",
    "response_lines",
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
# The names the parser leaves out of RequestHead.forward: the same set.
REQUEST_SKIP = _SKIP_REQUEST
_SKIP_RESPONSE = HOP_BY_HOP | {b"content-length"}
# Response headers a single pass looks at: the skipped ones, and X-Request-Id.
_SPECIAL_RESPONSE = _SKIP_RESPONSE | {b"x-request-id"}
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
    # What the parser already has as bytes, so the replica's head is not built
    # from the text again: the method and target as sent, the peer's address,
    # and the header lines that pass the fixed part of the hygiene (names not
    # in the request skip list), as pieces to join. None/empty: computed here.
    raw_method: bytes = b""
    raw_target: bytes = b""
    peer_bytes: bytes = b""
    forward: list[bytes] | None = None

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


def forward_lines(headers: list[tuple[bytes, bytes]], skip: frozenset[bytes]) -> list[bytes]:
    """The header lines of ``headers`` whose lower-cased names are not in ``skip``, as
    pieces to join."""
    parts: list[bytes] = []
    for name, value in headers:
        if name.lower() not in skip:
            parts += (name, b": ", value, _CRLF)
    return parts


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
    The header lines the parser kept (``head.forward``) are used as they are
    unless ``Connection`` names headers or a ``strip`` header is present.
    """
    index = head.index
    kept = head.forward
    connection = index.get(b"connection")
    tokens = connection_tokens(connection) if connection else _NO_TOKENS
    if kept is None or tokens or (strip and not strip.isdisjoint(index)):
        skip = _SKIP_REQUEST
        if strip:
            skip = _SKIP_WITH.get(strip) or _skip_with(strip)
        kept = forward_lines(head.headers, skip | tokens if tokens else skip)
    if head.raw_method:
        parts = [head.raw_method, b" ", head.raw_target, b" HTTP/1.1\r\nHost: "]
    else:
        parts = [f"{head.method} {head.target} HTTP/1.1\r\nHost: ".encode("latin-1")]
    parts += (authority, _CRLF)
    parts += kept
    peer = head.peer_bytes or head.peer.encode("latin-1")
    prior = index.get(b"x-forwarded-for")
    if prior:
        parts += (b"X-Forwarded-For: ", prior, b", ", peer, _CRLF)
    else:
        parts += (b"X-Forwarded-For: ", peer, _CRLF)
    if b"x-forwarded-proto" not in index:
        parts.append(b"X-Forwarded-Proto: http\r\n")
    host = index.get(b"host")
    if host and b"x-forwarded-host" not in index:
        parts += (b"X-Forwarded-Host: ", host, _CRLF)
    parts += (b"X-Request-Id: ", request_id, _CRLF)
    if chunked:
        parts.append(b"Transfer-Encoding: chunked\r\n\r\n")
    elif body_length is not None:
        parts.append(b"Content-Length: %d\r\n\r\n" % body_length)
    else:
        parts.append(_CRLF)
    return b"".join(parts)


def response_lines(
    headers: list[tuple[bytes, bytes]],
) -> tuple[list[bytes], bytes | None, bytes | None, bool]:
    """One pass over a response's headers: the lines the client gets, as pieces to join
    (hop-by-hop headers, those a ``Connection`` header names, and ``Content-Length``
    out); the last ``Content-Length`` and ``Transfer-Encoding`` values; whether an
    ``X-Request-Id`` line is kept."""
    parts: list[bytes] = []
    length: bytes | None = None
    coding: bytes | None = None
    has_id = False
    named: frozenset[bytes] = _NO_TOKENS  # names a Connection header marks hop-by-hop
    for name, value in headers:
        lower = name.lower()
        if lower in _SPECIAL_RESPONSE:
            if lower == b"x-request-id":
                has_id = True
            else:
                if lower == b"content-length":
                    length = value
                elif lower == b"transfer-encoding":
                    coding = value
                elif lower == b"connection" and value not in _NAMES_NO_HEADER:
                    tokens = connection_tokens(value)
                    if tokens:
                        named = named | tokens
                continue
        parts += (name, b": ", value, _CRLF)
    if named:
        # Rare: a Connection header names other headers. They go too,
        # wherever they came (before or after it): a second pass.
        parts = []
        has_id = False
        for name, value in headers:
            lower = name.lower()
            if lower in _SKIP_RESPONSE or lower in named:
                continue
            if lower == b"x-request-id":
                has_id = True
            parts += (name, b": ", value, _CRLF)
    return parts, length, coding, has_id


def response_head(
    status: int,
    reason: bytes,
    lines: list[bytes],
    *,
    has_id: bool,
    request_id: bytes,
    content_length: int | None,
    chunked: bool,
    close: bool,
    http10: bool,
) -> bytes:
    """A response head for the client from :func:`response_lines`' ``lines`` (consumed)."""
    parts = [_STATUS_LINES.get((status, reason)) or _status_line(status, reason)]
    parts += lines
    if not has_id:
        parts += (b"X-Request-Id: ", request_id, _CRLF)
    if content_length is not None:
        line = _LENGTH_LINES.get(content_length)
        if line is None:
            line = _length_line(content_length)
        parts.append(line)
    elif chunked:
        parts.append(b"Transfer-Encoding: chunked\r\n")
    if close:
        parts.append(b"Connection: close\r\n\r\n")
    elif http10:
        parts.append(b"Connection: keep-alive\r\n\r\n")
    else:
        parts.append(_CRLF)
    return b"".join(parts)


# A replica answers with few distinct status lines and, for small answers, few
# distinct lengths: each line is formatted once (bounded, as replicas come and go).
_STATUS_LINES: dict[tuple[int, bytes], bytes] = {}
_LENGTH_LINES: dict[int, bytes] = {}
_CACHED_AT_MOST = 1024


def _status_line(status: int, reason: bytes) -> bytes:
    if len(_STATUS_LINES) >= _CACHED_AT_MOST:
        _STATUS_LINES.clear()
    line = _STATUS_LINES[(status, reason)] = b"HTTP/1.1 %d %b\r\n" % (status, reason)
    return line


def _length_line(length: int) -> bytes:
    if len(_LENGTH_LINES) >= _CACHED_AT_MOST:
        _LENGTH_LINES.clear()
    line = _LENGTH_LINES[length] = b"Content-Length: %d\r\n" % length
    return line


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
    lines, _, _, has_id = response_lines(headers)
    return response_head(
        status,
        reason,
        lines,
        has_id=has_id,
        request_id=request_id,
        content_length=content_length,
        chunked=chunked,
        close=close,
        http10=http10,
    )


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
