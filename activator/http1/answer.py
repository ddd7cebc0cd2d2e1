"""A replica's answer, parsed: where it ends, and what of it the client gets.

One :class:`AnswerParser` per replica connection (:mod:`activator.http1.upstream`)
is llhttp's callback object for every answer on it. It keeps one answer's
state at a time (:meth:`AnswerParser.reset` between exchanges): the head as
it arrives, whether the answer is complete, how its body is relayed, and
whether bytes came past its end. The connection decides what to do with a
read; this parser says what the read means:

- :meth:`AnswerParser.feed` parses a read, and says when the answer failed
  (malformed, or a protocol switch the proxy never asks for); bytes past a
  complete answer are noted as excess, never parsed as a second answer;
- :meth:`AnswerParser.client_head` rewrites the head for the client (header
  hygiene in :mod:`activator.http1.heads`) and decides how the body goes
  out: bytes as they came (counted against Content-Length, or chunks
  accepted by the parser), or pieces framed again (a body that came whole
  with its head, or an answer to an HTTP/1.0 client, de-chunked);
- :meth:`AnswerParser.take_pieces` frames the parsed pieces again.
"""

from __future__ import annotations

from typing import cast

import httptools

from activator.http1.heads import response_head, response_lines
from activator.http1.relay import ClientSide

__all__ = ["AnswerParser", "possible_ends"]

_NO_BODY_STATUS = frozenset({204, 304})


class _Excess(Exception):
    """Raised in a parser callback to stop parsing at the end of an answer."""


class AnswerParser:
    """One replica connection's answers, one at a time (module docstring)."""

    __slots__ = (
        "chunks",
        "close_delimited",
        "complete",
        "excess",
        "framed",
        "head",
        "head_done",
        "head_sent",
        "headers",
        "interim",
        "is_head",
        "keep_alive",
        "parser",
        "pieces",
        "raw",
        "reason",
        "remaining",
        "status",
    )

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.reset(is_head=False)

    def reset(self, *, is_head: bool) -> None:
        """Ready for the next answer (``is_head``: to a HEAD request, so without a body)."""
        # The head's bytes as read: the read itself when it held the whole head.
        self.head: bytes | bytearray = b""
        self.head_done = False
        self.interim = 0
        self.complete = False
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.raw = True  # relay body bytes as they came (else the parser's pieces)
        self.chunks = False  # a chunked body relayed as it came (see the connection)
        self.framed = True  # pieces go out as chunks (not to an HTTP/1.0 client)
        self.remaining = -1  # Content-Length bytes still to relay; -1: not counted
        self.pieces: list[bytes] = []  # body pieces parsed in this read, not written yet
        self.excess = False  # the replica sent bytes past its answer
        self.head_sent = False
        self.close_delimited = False
        self.is_head = is_head
        self.keep_alive = True

    def feed(self, data: bytes | memoryview) -> str | None:
        """Parse ``data``; why the answer failed, or None."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            return "the replica switched protocols, which the proxy never asks for"
        except httptools.HttpParserError as exc:
            if self.complete:
                # What follows the answer is not relayed (the callbacks stopped
                # at its start); the connection is closed, not reused.
                self.excess = True
                return None
            return f"malformed response: {exc}"
        return None

    def up_to_end(self, data: bytes) -> tuple[bytes, str | None]:
        """The part of ``data`` up to the chunked answer's end (all of it when the end is
        not in it), parsed; and why the answer failed, or None.

        ``data`` is parsed up to each place the end could be, so where it
        ended is known and the bytes after it are held back (noted as excess:
        the connection is not reused).
        """
        view = memoryview(data)
        start = 0
        for end in possible_ends(data):
            failed = self.feed(view[start:end])
            if failed is not None:
                return b"", failed
            start = end
            if self.complete:
                break
        else:
            failed = self.feed(view[start:])
            if failed is not None:
                return b"", failed
            start = len(data)
        if start < len(data):
            self.excess = True
            data = data[:start]
        return data, None

    def close(self) -> None:
        """The connection is gone: the parser no longer refers back to this object."""
        self.parser = _CLOSED

    def take_pieces(self) -> bytes:
        """The chunked body's pieces parsed so far, framed again, and its end if it ended."""
        pieces = self.pieces
        if self.framed:
            if len(pieces) == 1:
                out = b"%x\r\n%b\r\n" % (len(pieces[0]), pieces[0])
            else:
                out = b"".join(b"%x\r\n%b\r\n" % (len(piece), piece) for piece in pieces)
            if self.complete:
                out += b"0\r\n\r\n"
        else:
            out = b"".join(pieces)
        pieces.clear()
        return out

    def on_message_begin(self) -> None:
        if self.complete:
            # A message after the answer: stop parsing here (see _feed).
            raise _Excess

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:
            return  # interim answer: dropped at message complete (the proxy sent no Expect)
        self.status = status
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        # Before the head went out, whether the pieces are needed (a chunked
        # body) is decided with the head; a raw body goes out as bytes.
        if not self.raw or not self.head_sent:
            self.pieces.append(body)

    def on_message_complete(self) -> None:
        if not self.head_done:
            # The end of an interim (1xx) answer: forget it, wait for the real one.
            self.interim += 1
            self.reason = b""
            self.headers = []
            return
        self.keep_alive = self.parser.should_keep_alive()
        self.complete = True

    def client_head(self, exchange: ClientSide) -> bytes:
        """The answer's head for the client, with what came after it that can go out now.

        Decides how the body is relayed (bytes as they came, counted, or
        pieces framed again) and whether the client connection closes after.
        """
        head = self.head
        http10 = exchange.head.version == "1.0"
        # Skip interim answers' heads, then the final head ends at the blank line.
        start = 0
        for _ in range(self.interim):
            start = head.index(b"\r\n\r\n", start) + 4
        end = head.index(b"\r\n\r\n", start) + 4
        status = self.status
        # One pass over the headers: the lines that go out, and the framing.
        lines, length_value, coding, has_id = response_lines(self.headers)
        chunked = coding is not None and coding.lower().rstrip().endswith(b"chunked")
        close = False
        content_length: int | None = None
        no_body = self.is_head or status in _NO_BODY_STATUS
        rest: bytes | bytearray = b""
        if no_body:
            content_length = int(length_value) if length_value is not None else None
            if status in _NO_BODY_STATUS:
                content_length = None
            self.complete = True  # no body follows, whatever the headers say
            if self.is_head:
                # httptools cannot be told that an answer to HEAD has no body, so
                # its parser would wait for one: the connection is not reused.
                self.keep_alive = False
            elif len(head) > end:
                self.excess = True  # a body after a 204 or 304
        elif length_value is not None and not chunked:
            content_length = int(length_value)
            rest = head[end : end + content_length]
            if len(head) - end > content_length:
                self.excess = True
            self.remaining = content_length - len(rest)
        elif chunked:
            if http10:
                self.raw = False
                self.framed = False  # an HTTP/1.0 client cannot read chunks: de-chunk, then close
                close = True
            elif self.complete:
                # The whole body came with the head, and maybe bytes past it:
                # framed again from the pieces, which end where the answer does.
                self.raw = False
            else:
                # All that came after the head is body the parser accepted.
                self.chunks = True
                rest = head[end:]
        else:
            self.close_delimited = True
            close = True
            rest = head[end:]
        conn = exchange.conn
        if close or not exchange.head.keep_alive or conn.must_close:
            close = True
            conn.must_close = True
        out = response_head(
            status,
            self.reason,
            lines,
            has_id=has_id,
            request_id=exchange.request_id,
            content_length=content_length,
            chunked=chunked and self.framed,
            close=close,
            http10=http10,
        )
        self.head = b""
        self.head_sent = True
        # Head and what came with it in one write: one syscall for a small answer.
        if self.raw:
            self.pieces.clear()
            return out + rest
        return out + self.take_pieces()


def possible_ends(data: bytes) -> list[int]:
    """Offsets in ``data`` where a chunked answer's final CRLF CRLF could end, in order.

    After each CRLF CRLF in ``data``, and within its first three bytes while
    they are CR or LF (the rest of a CRLF CRLF begun in an earlier read).
    """
    ends: list[int] = []
    for i in range(min(3, len(data))):
        if data[i] not in b"\r\n":
            break
        ends.append(i + 1)
    found = data.find(b"\r\n\r\n")
    while found >= 0:
        ends.append(found + 4)
        found = data.find(b"\r\n\r\n", found + 1)
    return ends


class _ClosedParser:
    """What a closed connection's answer parser holds instead of its parser."""

    def feed_data(self, data: bytes | memoryview) -> None:
        raise httptools.HttpParserError("the connection is closed")


_CLOSED = cast(httptools.HttpResponseParser, _ClosedParser())
