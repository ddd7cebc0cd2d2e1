"""The fake vLLM's answers: a whole JSON body, or a stream of server-sent events.

In vLLM's shapes: the OpenAI completion and chat completion objects, and for
``stream`` chunks in the OpenAI chunk format ending in ``data: [DONE]``, with
``stream_options.include_usage`` (a last chunk with the usage) and vLLM's
``continuous_usage_stats`` (the usage so far in every chunk). The text is
words from a fixed list, one per token.

Main decision, for cost: every chunk of a stream is three byte strings
joined (a prefix and suffix built once per request around a pre-encoded
word); several tokens that arrived together go out in one write. A stream
set to break (fault injection) resets the connection mid-stream, as a dying
server would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from loadtests.sandbox.servers.engine_runtime import TokenStream
from loadtests.sandbox.servers.vllm_requests import Job

__all__ = ["WORDS", "answer_stream", "answer_whole"]

_TEXT = (
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "model",
    "servers", "batch", "tokens", "on", "simulated", "GPUs", "and", "nobody", "waits", "too",
    "long", "for", "an", "answer",
)  # fmt: skip
WORDS = tuple(f" {w}".encode() for w in _TEXT)  # one token each, JSON-safe as they are


class _Chunks:
    """Pre-built bytes for one request's stream."""

    def __init__(self, *, chat: bool, request_id: str, created: int, model: str) -> None:
        head = (
            f'{{"id":"{request_id}","object":"'
            f'{"chat.completion.chunk" if chat else "text_completion"}",'
            f'"created":{created},"model":{json.dumps(model)},'
        )
        self.head = head
        if chat:
            self.prefix = f'data: {head}"choices":[{{"index":0,"delta":{{"content":"'.encode()
            self.suffix = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
            self.role = (
                f'data: {head}"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},'
                '"logprobs":null,"finish_reason":null}]}\n\n'
            ).encode()
            self.last_suffix = b'"},"logprobs":null,"finish_reason":"%s","stop_reason":null}]}\n\n'
        else:
            self.prefix = f'data: {head}"choices":[{{"index":0,"text":"'.encode()
            self.suffix = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
            self.role = b""
            self.last_suffix = b'","logprobs":null,"finish_reason":"%s","stop_reason":null}]}\n\n'

    @staticmethod
    def with_usage(suffix: bytes, prompt: int, completion: int) -> bytes:
        """A chunk's ``suffix`` carrying the usage so far (``continuous_usage_stats``)."""
        usage = json.dumps(_usage(prompt, completion), separators=(",", ":")).encode()
        return suffix[: -len(b"}\n\n")] + b',"usage":' + usage + b"}\n\n"

    def usage(self, prompt: int, completion: int) -> bytes:
        usage = _usage(prompt, completion)
        return f'data: {self.head}"choices":[],"usage":{json.dumps(usage)}}}\n\n'.encode()


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }


async def answer_whole(
    job: Job, stream: TokenStream, *, chat: bool, request_id: str
) -> web.Response:
    """The whole answer as one JSON body, once the engine has emitted every token."""
    while not stream.done:
        await stream.wait_beyond(stream.emitted)
    text = b"".join(WORDS[i % len(WORDS)] for i in range(job.output_tokens)).decode()
    choice: dict[str, Any]
    if chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": job.finish_reason,
            "stop_reason": None,
        }
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": job.finish_reason,
            "stop_reason": None,
        }
    return web.json_response(
        {
            "id": request_id,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": job.model,
            "choices": [choice],
            "usage": _usage(job.prompt_tokens, job.output_tokens),
        }
    )


async def answer_stream(
    job: Job,
    stream: TokenStream,
    request: web.Request,
    *,
    chat: bool,
    request_id: str,
    break_at: int | None,
    cancel: Callable[[TokenStream], None],
) -> web.StreamResponse:
    """The answer as server-sent events, tokens written as the engine emits them.

    ``break_at``: the token count at which to reset the connection (a fault),
    ``cancel`` what frees the request's place in the engine then."""
    chunks = _Chunks(chat=chat, request_id=request_id, created=int(time.time()), model=job.model)
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
        }
    )
    await resp.prepare(request)
    sent = 0
    total = job.output_tokens
    words, n_words = WORDS, len(WORDS)
    prefix, suffix = chunks.prefix, chunks.suffix
    last_suffix = chunks.last_suffix % job.finish_reason.encode()
    while sent < total:
        await stream.wait_beyond(sent)
        upto = stream.emitted
        if break_at is not None and upto >= break_at:
            # Fault: reset the connection mid-stream, as a dying server would.
            cancel(stream)
            if request.transport is not None:
                request.transport.abort()
            return resp
        parts = [chunks.role] if sent == 0 and chat else []
        for i in range(sent, upto):
            parts.append(prefix)
            parts.append(words[i % n_words])
            end = last_suffix if i == total - 1 else suffix
            if job.continuous_usage:
                end = chunks.with_usage(end, job.prompt_tokens, i + 1)
            parts.append(end)
        sent = upto
        if sent >= total:
            if job.include_usage:
                parts.append(chunks.usage(job.prompt_tokens, total))
            parts.append(b"data: [DONE]\n\n")
        try:
            await resp.write(b"".join(parts))
        except ConnectionResetError:
            return resp  # the client left; the caller frees its place
    await resp.write_eof()
    return resp
