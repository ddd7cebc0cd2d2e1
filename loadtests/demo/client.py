"""A small OpenAI-compatible streaming client that times what a user feels.

Used by the demo and the end-to-end tests (locust drives the load tests).
It measures time to first token on its own clock from the moment it starts
sending, reads the server-sent events line by line as they arrive, and turns
every outcome, including a refused connection or a stream cut midway, into a
:class:`~loadtests.demo.observe.RequestResult` rather than an exception, so a
caller can count failures instead of losing them.
"""

from __future__ import annotations

import time

import aiohttp

from loadtests.demo.observe import RequestResult
from loadtests.streaming import SseParser, StreamMeter

__all__ = ["stream_chat"]


async def stream_chat(
    session: aiohttp.ClientSession,
    base_url: str,
    *,
    model: str,
    prompt: str = "Tell me about tides.",
    max_tokens: int = 32,
    headers: dict[str, str] | None = None,
    clock_start_s: float = 0.0,
) -> RequestResult:
    """POST a streaming chat completion and time it.

    ``clock_start_s`` is subtracted from ``started_s`` so results line up with
    the caller's timeline.
    """
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = time.monotonic()
    meter = StreamMeter(origin_s=started, expected_output_tokens=max_tokens)
    parser = SseParser()
    status = 0
    try:
        async with session.post(
            f"{base_url.rstrip('/')}/v1/chat/completions", json=body, headers=headers
        ) as response:
            status = response.status
            if status != 200:
                meter.fail(f"HTTP {status}: {(await response.text())[:200]}")
            else:
                async for chunk in response.content.iter_any():
                    now = time.monotonic()
                    for data in parser.feed(chunk):
                        meter.event(data, now_s=now)
                for data in parser.close():
                    meter.event(data, now_s=time.monotonic())
    except (aiohttp.ClientError, TimeoutError) as exc:
        meter.fail(repr(exc))
    outcome = meter.finish(now_s=time.monotonic())
    return RequestResult(
        started_s=started - clock_start_s,
        status=status,
        ttft_s=outcome.ttft_s,
        total_s=outcome.e2e_s,
        error=outcome.error or "",
    )
