"""The SPDY/3.1 framing that ``kubectl port-forward`` speaks, server side.

kubectl (client-go) carries port-forward streams over SPDY/3.1, tunnelled
inside WebSocket binary messages (``SPDY/3.1+portforward.k8s.io``). This
module is the byte-level part, free of I/O: :class:`FrameReader` turns the
bytes of the tunnel (cut anywhere by the messages) into frames, and the
``*_frame`` functions build the frames the server sends.

What the server must understand, and nothing more:

=================  ====  ==========================================
frame              type  handled
=================  ====  ==========================================
data               --    payload for a stream; flag FIN ends its side
SYN_STREAM         1     a new stream with headers: answer SYN_REPLY
RST_STREAM         3     the client abandoned a stream
SETTINGS           4     ignored
PING               6     echoed, as the protocol asks
GOAWAY             7     the client is leaving
HEADERS            8     decoded (to keep the header stream in step), ignored
WINDOW_UPDATE      9     ignored (client-go's SPDY does no flow control)
=================  ====  ==========================================

Header blocks are compressed with one zlib stream per direction for the
whole connection, primed with the dictionary of the SPDY/3 specification,
so every block must be decompressed in order, even those ignored.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

__all__ = [
    "FLAG_FIN",
    "Frame",
    "FrameReader",
    "HeaderCodec",
    "SpdyError",
    "data_frame",
    "ping_frame",
    "rst_stream_frame",
    "syn_reply_frame",
]

VERSION = 3
FLAG_FIN = 0x01
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1, 2, 3, 4, 6, 7, 8, 9,
)  # fmt: skip
RST_CANCEL = 5

# The header dictionary of SPDY/3 (draft-mbelshe-httpbis-spdy-00, 2.6.10.1):
# length-prefixed names, then status lines, dates and common values.
_WORDS = (
    "options head post put delete trace accept accept-charset accept-encoding "
    "accept-language accept-ranges age allow authorization cache-control connection "
    "content-base content-encoding content-language content-length content-location "
    "content-md5 content-range content-type date etag expect expires from host if-match "
    "if-modified-since if-none-match if-range if-unmodified-since last-modified location "
    "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after "
    "server te trailer transfer-encoding upgrade user-agent vary via warning "
    "www-authenticate method get status|200 OK|version|HTTP/1.1|url|public|set-cookie|"
    "keep-alive|origin"
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417"
    "502504505203 Non-Authoritative Information204 No Content301 Moved Permanently"
    "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error"
    "501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct "
    "Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,"
    "image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,"
    "publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)


def _dictionary() -> bytes:
    head, _, rest = _WORDS.partition(" status|")
    words = [*head.split(), "status", *rest.split("|")]
    return b"".join(struct.pack(">I", len(w)) + w.encode() for w in words) + _TAIL.encode()


DICTIONARY = _dictionary()


class SpdyError(ValueError):
    """The peer sent something that is not SPDY/3.1 as this server reads it."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame: ``kind`` is 0 for data, else the control frame's type."""

    kind: int
    flags: int
    stream_id: int  # 0 for frames not about one stream
    payload: bytes
    headers: dict[str, list[str]] = field(default_factory=dict)

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class HeaderCodec:
    """The two header-compression streams of one connection."""

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zdict=DICTIONARY)

    def decode(self, block: bytes) -> dict[str, list[str]]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as error:
            raise SpdyError(f"header block does not inflate: {error}") from None
        headers: dict[str, list[str]] = {}
        try:
            (count,) = struct.unpack_from(">I", raw, 0)
            pos = 4
            for _ in range(count):
                (length,) = struct.unpack_from(">I", raw, pos)
                name = raw[pos + 4 : pos + 4 + length].decode().lower()
                pos += 4 + length
                (length,) = struct.unpack_from(">I", raw, pos)
                value = raw[pos + 4 : pos + 4 + length].decode()
                pos += 4 + length
                headers.setdefault(name, []).extend(value.split("\x00"))
        except (struct.error, UnicodeDecodeError) as error:
            raise SpdyError(f"malformed header block: {error}") from None
        return headers

    def encode(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            for part in (name.lower().encode(), value.encode()):
                raw += struct.pack(">I", len(part)) + part
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)


class FrameReader:
    """Frames out of a byte stream that arrives in arbitrary pieces."""

    def __init__(self, codec: HeaderCodec) -> None:
        self._codec = codec
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head = bytes(self._buffer[:8])
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frames.append(self._frame(head, payload))
        return frames

    def _frame(self, head: bytes, payload: bytes) -> Frame:
        flags = head[4]
        if not head[0] & 0x80:
            stream_id = int.from_bytes(head[:4], "big") & 0x7FFFFFFF
            return Frame(0, flags, stream_id, payload)
        version = int.from_bytes(head[:2], "big") & 0x7FFF
        kind = int.from_bytes(head[2:4], "big")
        if version != VERSION:
            raise SpdyError(f"SPDY version {version}; this server speaks 3")
        stream_id = 0
        if kind in (SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS, WINDOW_UPDATE) and payload:
            stream_id = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        headers: dict[str, list[str]] = {}
        if kind == SYN_STREAM:
            headers = self._codec.decode(payload[10:])
        elif kind in (SYN_REPLY, HEADERS):
            headers = self._codec.decode(payload[4:])
        return Frame(kind, flags, stream_id, payload, headers)


def _control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def syn_reply_frame(codec: HeaderCodec, stream_id: int, *, fin: bool = False) -> bytes:
    block = codec.encode({})
    return _control(SYN_REPLY, FLAG_FIN if fin else 0, struct.pack(">I", stream_id) + block)


def rst_stream_frame(stream_id: int, status: int = RST_CANCEL) -> bytes:
    return _control(RST_STREAM, 0, struct.pack(">II", stream_id, status))


def ping_frame(payload: bytes) -> bytes:
    return _control(PING, 0, payload)


def data_frame(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
    flags = FLAG_FIN if fin else 0
    return struct.pack(">II", stream_id, (flags << 24) | len(data)) + data
