"""A client connection's bytes, parsed into exchanges: llhttp's callbacks, within the limits.

``httptools`` (the llhttp parser with a callback API, which uvicorn uses)
calls a :class:`RequestReader` as it parses; the reader builds each request
head as its lines come, bounds each line and the whole head
(:class:`~activator.http1.reading.ServerLimits`), and checks its framing as
nginx does (:func:`check_framing`): HTTP/1.1 needs ``Host``;
``Transfer-Encoding`` only as exactly ``chunked``, never with
``Content-Length`` (a request two parsers may read two ways is how requests
are smuggled); a header that decides where a request goes or ends, sent
twice, is refused. Each complete head becomes an
:class:`~activator.http1.exchange.Exchange` with its
:class:`~activator.http1.request_body.RequestBody`, which the reader feeds
until the body ends. A request it cannot read is a
:class:`~activator.http1.rejections.RequestRejected`, answered by the
connection before any of it reaches a replica.
"""

from __future__ import annotations

import logging
from typing import Protocol, cast

import httptools

from activator.http1.exchange import Exchange, ExchangeOwner
from activator.http1.heads import REQUEST_SKIP, RequestHead
from activator.http1.reading import PAUSE_UPGRADE
from activator.http1.rejections import (
    BadFraming,
    HeadTooLarge,
    RequestRejected,
    UnsupportedTransferEncoding,
    UnsupportedVersion,
)
from activator.http1.request_body import BodySource, RequestBody

__all__ = ["ReaderOwner", "RequestReader", "check_framing"]

log = logging.getLogger(__name__)


class ReaderOwner(BodySource, ExchangeOwner, Protocol):
    """The client connection a reader parses for (its requests' bodies and exchanges
    belong to it too)."""

    peer: str
    peer_bytes: bytes
    head_began: float


class RequestReader:
    """A client connection's bytes, parsed into exchanges: llhttp's callbacks, within the limits.

    One per client connection. It builds each request head as its
    lines come (a header index by lower-cased name, repeated headers
    combined or refused), checks the head's framing, and makes an
    :class:`Exchange` with its :class:`RequestBody`, which it feeds until the
    body ends. The exchanges a read completed wait in ``parsed`` until the
    connection hands them on.
    """

    __slots__ = (
        "conn",
        "forward",
        "head_bytes",
        "head_seen",
        "headers",
        "index",
        "parsed",
        "parser",
        "parsing",
        "url",
    )

    def __init__(self, conn: ReaderOwner) -> None:
        self.conn = conn
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.index: dict[bytes, bytes] = {}  # lower-cased name -> value, built as they come
        # The lines the replica gets, as pieces (RequestHead.forward): the
        # name is lower-cased here once, not again when the head is written.
        self.forward: list[bytes] = []
        self.head_bytes = 0  # of the header lines parsed so far
        self.head_seen = 0  # bytes read since the head began (a bound on its size)
        self.parsing: RequestBody | None = None  # the body being read
        self.parsed: list[Exchange] = []  # heads parsed in this read, not handed on yet

    def failed(self, exc: Exception) -> RequestRejected | None:
        """What the parser's ``exc`` means: the rejection when a request cannot be
        served as sent, None for an upgrade (served as a plain request, then closed).

        The connection calls the parser itself (``parser.feed_data``): a read
        that parses costs no call of this reader's.
        """
        if isinstance(exc, httptools.HttpParserUpgrade):
            # Upgrade is hop-by-hop and never passed on: the request is served
            # as a plain one and the connection closes after it.
            conn = self.conn
            conn.must_close = True
            if self.parsing is not None:
                self.parsing.finish()
                self.parsing = None
            conn.pause_body(PAUSE_UPGRADE)
            return None
        if isinstance(exc, httptools.HttpParserCallbackError):
            cause = exc.__context__
            if isinstance(cause, RequestRejected):
                return cause
            log.error("request parsing failed in a callback", exc_info=cause)
            return RequestRejected("the request could not be read")
        # Mid-body (a malformed chunk), where the request ends is in doubt.
        rejected = BadFraming if self.parsing is not None else RequestRejected
        return rejected(str(exc))

    def close(self) -> None:
        """The connection is gone: nothing more is parsed."""
        self.parsed = []
        # The parser refers back to this reader (its callbacks), and this reader
        # to its connection: without this, what they hold waits for the cyclic
        # collector.
        self.parser = _CLOSED
        del self.conn

    # No on_message_begin (a callback per request saved): the head's buffers
    # start empty, and on_headers_complete and on_message_complete (trailers)
    # empty them for the next one.

    def on_url(self, url: bytes) -> None:
        self.url += url
        if len(self.url) > self.conn.limits.max_header_bytes:
            raise HeadTooLarge(
                f"the request line is over {self.conn.limits.max_header_bytes} bytes"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        headers = self.headers
        headers.append((name, value))
        lower = name.lower()
        index = self.index
        if lower in index:
            _repeated(index, lower, value)
        else:
            index[lower] = value
        if lower not in REQUEST_SKIP:
            self.forward += (name, b": ", value, b"\r\n")
        limits = self.conn.limits
        if len(headers) > limits.max_headers:
            raise HeadTooLarge(f"more than {limits.max_headers} header lines")
        line = len(name) + len(value) + 4  # with ": " and CRLF
        if line - 2 > limits.max_header_bytes:
            raise HeadTooLarge(f"a header line is over {limits.max_header_bytes} bytes")
        # Lines that came whole in one read (data_received counts the others).
        self.head_bytes += line
        if self.head_bytes > limits.max_head_bytes:
            raise HeadTooLarge(f"the head is over {limits.max_head_bytes} bytes")

    def on_headers_complete(self) -> None:
        conn = self.conn
        parser = self.parser
        index = self.index
        version = parser.get_http_version()
        if (
            version != "1.1"
            or b"host" not in index
            or b"content-length" in index
            or b"transfer-encoding" in index
        ):
            check_framing(version, index)  # else nothing in it to check: no call
        method = parser.get_method()
        url = self.url
        head = RequestHead(
            method=method.decode("latin-1"),
            target=url.decode("latin-1"),
            version=version,
            headers=self.headers,
            peer=conn.peer,
            keep_alive=parser.should_keep_alive(),
            index=index,
            raw_method=method,
            raw_target=url,
            peer_bytes=conn.peer_bytes,
            forward=self.forward,
        )
        self.url = b""
        self.headers = []
        self.forward = []
        self.index = {}
        self.head_bytes = 0
        self.head_seen = 0
        conn.head_began = 0.0
        expect = index.get(b"expect")
        body = RequestBody(
            conn, expects_continue=expect is not None and expect.lower() == b"100-continue"
        )
        self.parsing = body
        self.parsed.append(Exchange(conn, head, body))

    def on_body(self, body: bytes) -> None:
        parsing = self.parsing
        if parsing is not None:
            parsing.feed(body)

    def on_message_complete(self) -> None:
        if self.headers:
            # Trailer fields of a chunked body: not passed on, and not the
            # next request's headers.
            self.headers = []
            self.index = {}
            self.forward = []
        parsing = self.parsing
        self.parsing = None
        if parsing is not None:
            parsing.finish()


def _repeated(index: dict[bytes, bytes], lower: bytes, value: bytes) -> None:
    """A header name seen twice in one head: combine, refuse, or keep the last."""
    if lower in _COMBINED:
        # Lists (RFC 9110 §5.3): a second Connection header's tokens count too.
        index[lower] = index[lower] + b", " + value
    elif lower in _ONCE:
        raise BadFraming(f"{lower.decode('latin-1')} sent more than once")
    else:
        index[lower] = value


_COMBINED = frozenset({b"connection", b"x-forwarded-for"})
# Headers that decide where the request goes or where it ends: two of them
# are two readings of one request (RFC 9112 §3.2, §6.3).
_ONCE = frozenset({b"host", b"content-length", b"transfer-encoding"})
# Content-Length digits: 18 fit in 63 bits, and 10^18 bytes is no body anyone sends.
_MAX_LENGTH_DIGITS = 18


def check_framing(version: str, index: dict[bytes, bytes]) -> None:
    """Refuse a head whose version or body framing the activator will not pass on.

    As nginx does: HTTP/1.1 needs ``Host``; ``Transfer-Encoding`` is allowed
    only as exactly ``chunked``, only in HTTP/1.1, and never beside
    ``Content-Length`` (a request two parsers may read two ways is how
    requests are smuggled); ``Content-Length`` is digits that fit in 63 bits.
    """
    if version != "1.1" and version != "1.0":
        raise UnsupportedVersion(f"got HTTP/{version}")
    if b"host" not in index and version == "1.1":
        raise RequestRejected("an HTTP/1.1 request needs a Host header")
    coding = index.get(b"transfer-encoding")
    if coding is not None:
        if version == "1.0":
            raise BadFraming("Transfer-Encoding in an HTTP/1.0 request")
        if coding.strip().lower() != b"chunked":
            raise UnsupportedTransferEncoding(f"got {coding.decode('latin-1')!r}")
        if b"content-length" in index:
            raise BadFraming("both Content-Length and Transfer-Encoding")
    length = index.get(b"content-length")
    if length is not None:
        length = length.strip(b" \t")  # llhttp leaves trailing whitespace in a value
    if length is not None and (not length.isdigit() or len(length) > _MAX_LENGTH_DIGITS):
        raise BadFraming(f"Content-Length {length.decode('latin-1')!r} is not a byte count")


class _ClosedParser:
    """What a closed connection holds instead of its parser."""

    def feed_data(self, data: bytes) -> None:
        raise httptools.HttpParserError("the connection is closed")


_CLOSED = cast(httptools.HttpRequestParser, _ClosedParser())
