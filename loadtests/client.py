"""A small OpenAI-compatible streaming client that times what a user feels.

Used by the demo and the end-to-end tests (locust drives the load tests).
It measures time to first token on its own clock from the moment it starts
sending, reads the server-sent events line by line as they arrive, and turns
every outcome, including a refused connection or a stream cut midway, into a
:class:`~loadtests.observe.RequestResult` rather than an exception, so a
caller can count failures instead of losing them.
"""

from __future__ import annotations

import json
import time

import aiohttp

from loadtests.observe import RequestResult

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
    }
    started = time.monotonic()
    ttft: float | None = None
    done = False
    try:
        async with session.post(
            f"{base_url.rstrip('/')}/v1/chat/completions", json=body, headers=headers
        ) as response:
            if response.status != 200:
                text = (await response.text())[:200]
                return RequestResult(
                    started - clock_start_s,
                    response.status,
                    None,
                    time.monotonic() - started,
                    text,
                )
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    done = True
                    break
                if ttft is None:
                    chunk = json.loads(payload)
                    choices = chunk.get("choices") or []
                    if choices and (choices[0].get("delta") or {}).get("content"):
                        ttft = time.monotonic() - started
            status = response.status
    except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
        return RequestResult(
            started - clock_start_s, 0, ttft, time.monotonic() - started, repr(exc)
        )
    error = "" if done else "stream ended without [DONE]"
    return RequestResult(started - clock_start_s, status, ttft, time.monotonic() - started, error)
