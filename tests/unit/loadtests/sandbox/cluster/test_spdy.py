"""SPDY/3.1 framing as the port-forward tunnel reads it.

Covers: the header dictionary is the specification's (its Adler-32, which
zlib checks on both sides); frames cut anywhere by the tunnel's messages
come out whole and in order; header blocks share one compression stream
across frames; data frames carry FIN; a version other than 3 is refused.
"""

from __future__ import annotations

import struct
import zlib

import pytest

from loadtests.sandbox.cluster import spdy


def _syn_stream(client: spdy.HeaderCodec, stream_id: int, headers: dict[str, str]) -> bytes:
    payload = struct.pack(">IIBB", stream_id, 0, 0, 0) + client.encode(headers)
    return struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, len(payload)) + payload


def test_the_dictionary_is_the_specifications() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert zlib.adler32(spdy.DICTIONARY) == 0xE3C6A7C2


def test_frames_cut_anywhere_come_out_whole() -> None:
    client = spdy.HeaderCodec()
    wire = (
        _syn_stream(client, 1, {"streamType": "error", "port": "8080", "requestID": "0"})
        + _syn_stream(client, 3, {"streamType": "data", "port": "8080", "requestID": "0"})
        + spdy.data_frame(3, b"GET / HTTP/1.1\r\n\r\n")
        + spdy.data_frame(3, b"", fin=True)
    )
    reader = spdy.FrameReader(spdy.HeaderCodec())
    frames = []
    for start in range(0, len(wire), 7):
        frames += reader.feed(wire[start : start + 7])
    assert [(f.kind, f.stream_id, f.fin) for f in frames] == [
        (spdy.SYN_STREAM, 1, False),
        (spdy.SYN_STREAM, 3, False),
        (0, 3, False),
        (0, 3, True),
    ]
    assert frames[1].headers == {"streamtype": ["data"], "port": ["8080"], "requestid": ["0"]}
    assert frames[2].payload == b"GET / HTTP/1.1\r\n\r\n"


def test_another_version_is_refused() -> None:
    frame = struct.pack(">HHI", 0x8002, spdy.PING, 4) + b"\0\0\0\1"
    with pytest.raises(spdy.SpdyError, match="SPDY version 2"):
        spdy.FrameReader(spdy.HeaderCodec()).feed(frame)
