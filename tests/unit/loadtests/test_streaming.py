"""SSE parsing and stream timing (loadtests.streaming).

Covers:
- SSE framing: events split across chunks anywhere, CRLF split between two
  chunks, CR-only lines, comments and other fields, multi-line data, a last
  event without its blank line;
- TTFT from the first event with text (a chat stream's role-only first delta
  is not a token), TPOT over the tokens after the first, end-to-end time;
- the token count from usage when present, else from text events;
- failures: no [DONE], no text, an error event, a usage count other than
  asked, a transport failure.
"""

from __future__ import annotations

import json
import re

import pytest

from loadtests.streaming import SseParser, StreamMeter


def feed_all(chunks: list[bytes]) -> list[str]:
    parser = SseParser()
    events: list[str] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events + parser.close()


STREAM = (
    b'data: {"a": 1}\n\n: keep-alive comment\n\n'
    b"event: x\ndata: two\ndata: lines\n\ndata: [DONE]\n\n"
)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_events_survive_any_chunking(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert feed_all(chunks) == ['{"a": 1}', "two\nlines", "[DONE]"]


def test_crlf_split_across_chunks_and_bare_cr() -> None:
    assert feed_all([b"data: a\r", b"\n\r\n", b"data:b\r\rdata: c"]) == ["a", "b", "c"]


def test_data_without_space_and_unknown_fields() -> None:
    assert feed_all([b"id: 3\nretry: 10\ndata:x\n\n"]) == ["x"]


def chat(content: str | None = None, role: bool = False) -> str:
    delta = {"role": "assistant", "content": ""} if role else {"content": content}
    return json.dumps({"choices": [{"index": 0, "delta": delta}]})


def usage(tokens: int) -> str:
    return json.dumps({"choices": [], "usage": {"completion_tokens": tokens}})


def test_chat_stream_timing() -> None:
    meter = StreamMeter(origin_s=100.0, expected_output_tokens=3)
    meter.event(chat(role=True), now_s=100.5)  # headers and role: not a token
    meter.event(chat("a"), now_s=102.0)
    meter.event(chat("b"), now_s=102.1)
    meter.event(chat("c"), now_s=102.2)
    meter.event(usage(3), now_s=102.2)
    meter.event("[DONE]", now_s=102.2)
    outcome = meter.finish(now_s=102.4)
    assert outcome.error is None
    assert outcome.ttft_s == pytest.approx(2.0)
    assert outcome.e2e_s == pytest.approx(2.4)
    assert outcome.tpot_s == pytest.approx(0.2)  # (102.4 - 102.0) / (3 - 1)
    assert outcome.output_tokens == 3


def test_completions_stream_counts_text_events_without_usage() -> None:
    meter = StreamMeter(origin_s=0.0, expected_output_tokens=2)
    meter.event(json.dumps({"choices": [{"text": "x"}]}), now_s=1.0)
    meter.event(json.dumps({"choices": [{"text": "y"}]}), now_s=2.0)
    meter.event("[DONE]", now_s=2.0)
    outcome = meter.finish(now_s=2.0)
    assert (outcome.error, outcome.output_tokens, outcome.tpot_s) == (None, 2, 1.0)


def test_one_token_has_no_tpot() -> None:
    meter = StreamMeter(origin_s=0.0)
    meter.event(chat("a"), now_s=1.0)
    meter.event("[DONE]", now_s=1.0)
    assert meter.finish(now_s=1.0).tpot_s is None


@pytest.mark.parametrize(
    ("events", "message"),
    [
        pytest.param([chat("a")], "without 'data: \\[DONE\\]'", id="no-done"),
        pytest.param([chat(role=True), "[DONE]"], "without any generated text", id="no-text"),
        pytest.param(
            [chat("a"), json.dumps({"error": {"message": "boom"}}), "[DONE]"], "boom", id="error"
        ),
        pytest.param([chat("a"), usage(1), "[DONE]"], "exactly 5 output tokens", id="short"),
        pytest.param(["not json"], "not JSON", id="garbage"),
    ],
)
def test_failures_are_explained(events: list[str], message: str) -> None:
    meter = StreamMeter(origin_s=0.0, expected_output_tokens=5)
    for data in events:
        meter.event(data, now_s=1.0)
    outcome = meter.finish(now_s=1.0)
    assert outcome.error is not None
    assert pytest.approx(1.0) == outcome.e2e_s
    assert re.search(message, outcome.error), outcome.error


def test_transport_failure_wins_over_later_checks() -> None:
    meter = StreamMeter(origin_s=0.0)
    meter.event(chat("a"), now_s=1.0)
    meter.fail("stream broken after 10 bytes")
    assert meter.finish(now_s=2.0).error == "stream broken after 10 bytes"
