"""Reading an OpenAI-compatible token stream and timing it, with no locust in sight.

Locust times a streamed request to its response headers, which is neither
the time to first token (TTFT) nor the end-to-end time. The locustfile feeds
the raw body chunks, as they arrive, to :class:`SseParser`, and each event's
data, with the time it arrived, to :class:`StreamMeter`; the meter's
:class:`StreamOutcome` holds the figures the locustfile reports as their own
locust entries.

Definitions (those of vLLM's ``benchmark_serving``):

- TTFT: from the request's origin (when it was sent, or for open-loop
  replay when it was *due*) to the first event that carries generated text.
  A chat stream opens with a role-only delta, which is not a token.
- end-to-end: from the origin to the end of the stream.
- TPOT (time per output token): ``(end - first token) / (output tokens - 1)``,
  defined only for two tokens or more.
- output tokens: ``usage.completion_tokens`` from the final usage event
  (``stream_options.include_usage``), else the number of events that carried
  text (vLLM sends one token per event).

SSE framing follows the HTML spec: lines end with LF, CR or CRLF; an event
ends at a blank line; ``data:`` lines of one event are joined with ``\\n``;
one optional space after the colon is dropped; lines starting with ``:`` are
comments; other fields (``event``, ``id``, ``retry``) are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["DONE", "SseParser", "StreamMeter", "StreamOutcome"]

DONE = "[DONE]"


class SseParser:
    """Incremental Server-Sent Events parser: bytes in, event data strings out."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[str]:
        """Feed raw bytes; return the data of every event completed by them."""
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = False
        self._buffer += chunk
        events: list[str] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                break
            end, width = cut
            line = self._buffer[:end]
            if width == 1 and self._buffer[end : end + 1] == b"\r" and end + 1 == len(self._buffer):
                self._pending_cr = True  # a CR at the end of what we have may be half a CRLF
            self._buffer = self._buffer[end + width :]
            event = self._line(line.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[str]:
        """End of stream: a last event without its blank line still counts."""
        events: list[str] = []
        if self._buffer:
            event = self._line(self._buffer.decode("utf-8", errors="replace"))
            self._buffer = b""
            if event is not None:
                events.append(event)
        if self._data:
            events.append("\n".join(self._data))
            self._data = []
        return events

    def _line(self, line: str) -> str | None:
        if line == "":
            if not self._data:
                return None
            event = "\n".join(self._data)
            self._data = []
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value.removeprefix(" "))
        return None


def _line_end(buffer: bytes) -> tuple[int, int] | None:
    """Index and width of the first line terminator (CRLF, LF or CR), if any."""
    lf = buffer.find(b"\n")
    cr = buffer.find(b"\r")
    if cr == -1 and lf == -1:
        return None
    if cr == -1 or (lf != -1 and lf < cr):
        return lf, 1
    if lf == cr + 1:
        return cr, 2
    return cr, 1


@dataclass(frozen=True, slots=True)
class StreamOutcome:
    """What one streamed request measured. Times in seconds; ``error`` set on failure."""

    e2e_s: float
    ttft_s: float | None
    tpot_s: float | None
    output_tokens: int
    error: str | None


class StreamMeter:
    """Collects the timing of one streamed completion (chat or plain)."""

    def __init__(self, *, origin_s: float, expected_output_tokens: int | None = None) -> None:
        self.origin_s = origin_s
        self.expected_output_tokens = expected_output_tokens
        self.first_token_s: float | None = None
        self.text_events = 0
        self.usage_tokens: int | None = None
        self.done = False
        self.error: str | None = None

    def event(self, data: str, *, now_s: float) -> None:
        """One SSE event's data, received at ``now_s``."""
        if self.error is not None:
            return
        if data.strip() == DONE:
            self.done = True
            return
        try:
            payload = json.loads(data)
        except ValueError:
            self.error = f"stream event is not JSON: {data[:200]!r}"
            return
        if not isinstance(payload, dict):
            self.error = f"stream event is not a JSON object: {data[:200]!r}"
            return
        if "error" in payload or payload.get("object") == "error":
            detail = payload.get("error", payload.get("message", payload))
            self.error = f"server reported an error in the stream: {detail}"[:500]
            return
        usage = payload.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.usage_tokens = usage["completion_tokens"]
        if _carries_text(payload.get("choices")):
            self.text_events += 1
            if self.first_token_s is None:
                self.first_token_s = now_s

    def fail(self, reason: str) -> None:
        """The transport failed (reset, timeout, bad status)."""
        if self.error is None:
            self.error = reason

    def finish(self, *, now_s: float) -> StreamOutcome:
        e2e_s = now_s - self.origin_s
        tokens = self.usage_tokens if self.usage_tokens is not None else self.text_events
        error = self.error
        if error is None and not self.done:
            error = "stream ended without 'data: [DONE]'"
        if error is None and self.first_token_s is None:
            error = "stream ended without any generated text"
        if (
            error is None
            and self.expected_output_tokens is not None
            and self.usage_tokens is not None
            and self.usage_tokens != self.expected_output_tokens
        ):
            error = (
                f"asked for exactly {self.expected_output_tokens} output tokens "
                f"(max_tokens with ignore_eos), got {self.usage_tokens}"
            )
        ttft_s = None if self.first_token_s is None else self.first_token_s - self.origin_s
        tpot_s = None
        if self.first_token_s is not None and tokens > 1:
            tpot_s = (now_s - self.first_token_s) / (tokens - 1)
        return StreamOutcome(
            e2e_s=e2e_s, ttft_s=ttft_s, tpot_s=tpot_s, output_tokens=tokens, error=error
        )


def _carries_text(choices: Any) -> bool:
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict) and delta.get("content"):
            return True  # chat completions
        if choice.get("text"):
            return True  # plain completions
    return False
