"""Header hygiene of the byte-level data path (:mod:`activator.http1.heads`), as tables.

Covers: to the replica, hop-by-hop headers (the fixed list and every token
named in ``Connection``) are dropped, ``Host`` becomes the replica's
address, ``Expect`` and caller-named headers are dropped,
``X-Forwarded-For`` is appended to, ``X-Forwarded-Proto``/``-Host`` are set
unless sent, ``X-Request-Id`` is the exchange's, and the body's framing is
stated once; to the client, hop-by-hop headers are dropped, the replica's
``X-Request-Id`` is kept (else added), framing and ``Connection`` follow
what the connection will do; the error answer is the OpenAI shape with its
length.
"""

from __future__ import annotations

import json

import pytest

from activator.http1.heads import (
    REQUEST_SKIP,
    RequestHead,
    client_response_head,
    error_head_and_body,
    forward_lines,
    upstream_request_head,
)


def head(*headers: tuple[str, str], version: str = "1.1") -> RequestHead:
    pairs = [(n.encode(), v.encode()) for n, v in headers]
    return RequestHead(
        method="POST",
        target="/v1/chat/completions?x=1",
        version=version,
        headers=pairs,
        peer="10.0.0.7",
        index={n.lower(): v for n, v in pairs},
    )


def parse(raw: bytes) -> tuple[str, list[tuple[str, str]]]:
    assert raw.endswith(b"\r\n\r\n")
    first, *lines = raw[:-4].decode("latin-1").split("\r\n")
    return first, [tuple(line.split(": ", 1)) for line in lines]  # type: ignore[misc]


def names(headers: list[tuple[str, str]]) -> list[str]:
    return [n.lower() for n, _ in headers]


def upstream(request: RequestHead, **kwargs: object) -> tuple[str, list[tuple[str, str]]]:
    options: dict[str, object] = {
        "authority": b"127.0.0.1:8001",
        "request_id": b"rid-1",
        "body_length": None,
        "chunked": False,
    }
    options.update(kwargs)
    return parse(upstream_request_head(request, **options))  # type: ignore[arg-type]


def test_request_line_and_host_is_the_replica() -> None:
    first, headers = upstream(head(("Host", "llama.example.com")))
    assert first == "POST /v1/chat/completions?x=1 HTTP/1.1"
    assert headers[0] == ("Host", "127.0.0.1:8001")
    assert names(headers).count("host") == 1
    assert ("X-Forwarded-Host", "llama.example.com") in headers


@pytest.mark.parametrize(
    "hop",
    [
        "Connection",
        "Keep-Alive",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "X-Listed-In-Connection",
        "Expect",
        "X-Tidal-Target",
    ],
)
def test_hop_by_hop_and_ours_never_reach_the_replica(hop: str) -> None:
    request = head(
        ("Host", "h"),
        ("Connection", "keep-alive, X-Listed-In-Connection"),
        (hop, "v"),
        ("Authorization", "Bearer t"),
    )
    _, headers = upstream(request, strip=frozenset({b"x-tidal-target"}))
    assert hop.lower() not in names(headers)
    assert ("Authorization", "Bearer t") in headers  # end-to-end headers pass


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        pytest.param((), "10.0.0.7", id="first-hop"),
        pytest.param((("X-Forwarded-For", "1.2.3.4"),), "1.2.3.4, 10.0.0.7", id="appended"),
    ],
)
def test_x_forwarded_for(sent: tuple[tuple[str, str], ...], expected: str) -> None:
    _, headers = upstream(head(("Host", "h"), *sent))
    assert [v for n, v in headers if n == "X-Forwarded-For"] == [expected]


def test_forwarded_proto_and_host_kept_when_the_client_sent_them() -> None:
    request = head(("Host", "h"), ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "edge"))
    _, headers = upstream(request)
    assert [v for n, v in headers if n.lower() == "x-forwarded-proto"] == ["https"]
    assert [v for n, v in headers if n.lower() == "x-forwarded-host"] == ["edge"]


def test_request_id_is_the_exchanges_once() -> None:
    _, headers = upstream(head(("Host", "h"), ("X-Request-Id", "client-id")), request_id=b"r9")
    assert [v for n, v in headers if n.lower() == "x-request-id"] == ["r9"]


@pytest.mark.parametrize(
    ("sent", "kwargs", "framing"),
    [
        pytest.param((("Content-Length", "5"),), {"body_length": 5}, ("Content-Length", "5")),
        pytest.param(
            (("Transfer-Encoding", "chunked"),),
            {"chunked": True},
            ("Transfer-Encoding", "chunked"),
        ),
        pytest.param((("Content-Length", "99"),), {"body_length": 12}, ("Content-Length", "12")),
    ],
)
def test_body_framing_stated_once(
    sent: tuple[tuple[str, str], ...], kwargs: dict[str, object], framing: tuple[str, str]
) -> None:
    _, headers = upstream(head(("Host", "h"), *sent), **kwargs)
    framing_headers = [
        h for h in headers if h[0].lower() in ("content-length", "transfer-encoding")
    ]
    assert framing_headers == [framing]


def response(*headers: tuple[str, str], **kwargs: object) -> tuple[str, list[tuple[str, str]]]:
    options: dict[str, object] = {
        "request_id": b"rid-1",
        "content_length": None,
        "chunked": False,
        "close": False,
        "http10": False,
    }
    options.update(kwargs)
    pairs = [(n.encode(), v.encode()) for n, v in headers]
    return parse(client_response_head(200, b"OK", pairs, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "sent",
    [
        (("Host", "m.example"), ("Accept", "*/*")),
        (("Host", "m.example"), ("Connection", "X-Secret"), ("X-Secret", "1"), ("Te", "x")),
        (("Host", "m.example"), ("X-Tidal-Target", "default/llama"), ("Accept", "*/*")),
    ],
)
def test_the_parsers_kept_lines_give_the_same_head(sent: tuple[tuple[str, str], ...]) -> None:
    # What the parser keeps as it reads (method, target and peer as bytes, the
    # lines past the fixed skip list) must change nothing the replica gets,
    # the Connection-named and stripped headers included.
    plain = head(*sent)
    kept = head(*sent)
    kept.raw_method, kept.raw_target = b"POST", b"/v1/chat/completions?x=1"
    kept.peer_bytes = b"10.0.0.7"
    kept.forward = forward_lines(kept.headers, REQUEST_SKIP)
    strip = frozenset({b"x-tidal-target"})
    assert upstream(kept, strip=strip) == upstream(plain, strip=strip)
    assert "x-tidal-target" not in names(upstream(kept, strip=strip)[1])


def test_response_hygiene() -> None:
    first, headers = response(
        ("Content-Type", "text/event-stream"),
        ("Connection", "keep-alive, X-Private"),
        ("X-Private", "p"),
        ("Keep-Alive", "timeout=5"),
        ("Transfer-Encoding", "chunked"),
        chunked=True,
    )
    assert first == "HTTP/1.1 200 OK"
    assert headers == [
        ("Content-Type", "text/event-stream"),
        ("X-Request-Id", "rid-1"),
        ("Transfer-Encoding", "chunked"),
    ]


def test_response_drops_what_connection_names_before_it_too() -> None:
    # Names listed in Connection are hop-by-hop wherever they appear; a
    # request id named there is dropped and the exchange's is added instead.
    _, headers = response(
        ("X-Early", "e"),
        ("X-Request-Id", "from-replica"),
        ("Content-Type", "text/plain"),
        ("Connection", "X-Early, X-Request-Id"),
        content_length=2,
    )
    assert headers == [
        ("Content-Type", "text/plain"),
        ("X-Request-Id", "rid-1"),
        ("Content-Length", "2"),
    ]


def test_response_keeps_the_replicas_request_id() -> None:
    _, headers = response(("X-Request-Id", "from-replica"), content_length=2)
    assert [v for n, v in headers if n.lower() == "x-request-id"] == ["from-replica"]
    assert ("Content-Length", "2") in headers


@pytest.mark.parametrize(
    ("kwargs", "connection"),
    [
        pytest.param({}, None, id="keep-alive-1.1"),
        pytest.param({"close": True}, "close", id="close"),
        pytest.param({"http10": True}, "keep-alive", id="keep-alive-1.0"),
    ],
)
def test_response_connection_header(kwargs: dict[str, object], connection: str | None) -> None:
    _, headers = response(**kwargs)
    assert [v for n, v in headers if n == "Connection"] == ([connection] if connection else [])


def test_error_answer_is_json_with_its_length() -> None:
    raw = error_head_and_body(
        503,
        error_type="overloaded_error",
        code="buffer_full",
        message="too many",
        request_id=b"r1",
        retry_after_s=2,
        close=True,
        http10=False,
    )
    head_bytes, body = raw.split(b"\r\n\r\n", 1)
    first, headers = parse(head_bytes + b"\r\n\r\n")
    assert first == "HTTP/1.1 503 Service Unavailable"
    fields = dict(headers)
    assert fields["Retry-After"] == "2"
    assert fields["Connection"] == "close"
    assert int(fields["Content-Length"]) == len(body)
    assert json.loads(body) == {
        "error": {"message": "too many", "type": "overloaded_error", "code": "buffer_full"}
    }
