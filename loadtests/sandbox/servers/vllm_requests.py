"""What a request to the fake vLLM asks for, read as vLLM reads it, refused in vLLM's words.

There is no tokenizer: token counts follow a stated rule, the one the
activator and the scaler estimate prompts by, so every count in the sandbox
agrees. A prompt counts one token per four characters, rounded up (the
usual rule of thumb for English), a chat message four more for its
template, and three for the reply's; token-id prompts count their ids.
Output length: ``max_tokens`` exactly with ``ignore_eos`` (what benchmarks
send), otherwise a natural length drawn per request (mean
``mean_output_tokens``) and capped by ``max_tokens``, ending with
``finish_reason`` ``stop`` or ``length`` accordingly. ``max_tokens``
defaults as vLLM's: 16 for completions, the rest of the context for chat.

Main decision: a request the fake cannot serve as vLLM would (a batch of
prompts, ``n`` above 1, a context too long, ``stream_options`` without
``stream``) is a :class:`BadRequest` with vLLM's status and parameter, never
a guess.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadtests.sandbox.servers.prompt_blocks import chat_blocks, prompt_blocks

__all__ = [
    "CHARS_PER_TOKEN",
    "CHAT_TOKENS_PER_MESSAGE",
    "BadRequest",
    "Job",
    "RequestReader",
    "count_chat_tokens",
    "count_prompt_tokens",
]

CHARS_PER_TOKEN = 4
CHAT_TOKENS_PER_MESSAGE = 4


class BadRequest(Exception):
    """A request refused as vLLM refuses it: the message, the status, the parameter at fault."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def count_prompt_tokens(prompt: object, *, param: str = "prompt") -> int:
    """Tokens in a completions prompt: a string, token ids, or a one-element list of either."""
    if isinstance(prompt, str):
        return max(1, math.ceil(len(prompt) / CHARS_PER_TOKEN))
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return count_prompt_tokens(prompt[0], param=param)
    if isinstance(prompt, list) and len(prompt) > 1:
        raise BadRequest(
            f"this fake vLLM serves one prompt per request; got a batch of {len(prompt)} prompts",
            param=param,
        )
    raise BadRequest(
        "prompt must be a non-empty string, a list of token ids, or a one-element list of those",
        param=param,
    )


def count_chat_tokens(messages: object) -> int:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of messages", param="messages")
    chars = 0
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise BadRequest(f"messages[{i}] must be an object with a role", param="messages")
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    chars += len(part["text"])
        elif content is not None:
            raise BadRequest(
                f"messages[{i}].content must be a string or a list of parts", param="messages"
            )
    return math.ceil(chars / CHARS_PER_TOKEN) + CHAT_TOKENS_PER_MESSAGE * len(messages) + 3


@dataclass(frozen=True, slots=True)
class Job:
    """One request, read: what the engine runs and how the answer is shaped."""

    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    stream: bool
    include_usage: bool
    model: str  # the served name the request asked for (the first when it named none)
    blocks: tuple[bytes, ...] = ()  # the prompt's chained block hashes
    adapter: str | None = None  # the LoRA adapter the request named
    # stream_options.continuous_usage_stats: every chunk carries the usage so far.
    continuous_usage: bool = False


class RequestReader:
    """Reads completions and chat requests for one server: its names, context and adapters."""

    def __init__(
        self,
        *,
        names: tuple[str, ...],
        serves_adapter: Callable[[str], bool],
        max_model_len: int,
        block_tokens: int,
        mean_output_tokens: float,
        rng: random.Random,
    ) -> None:
        self._names = names
        self._serves_adapter = serves_adapter
        self._max_model_len = max_model_len
        self._block_tokens = block_tokens
        self._mean_output_tokens = mean_output_tokens
        self._rng = rng

    def read(self, body: Any, *, chat: bool) -> Job:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model = body.get("model")
        if model is not None and model not in self._names and not self._serves_adapter(model):
            raise BadRequest(f"The model `{model}` does not exist.", status=404, param="model")
        block_size = self._block_tokens
        block_chars = block_size * CHARS_PER_TOKEN
        if chat:
            prompt_tokens = count_chat_tokens(body.get("messages"))
            blocks = chat_blocks(body["messages"], block_chars)
        else:
            if "prompt" not in body:
                raise BadRequest("prompt is required", param="prompt")
            prompt_tokens = count_prompt_tokens(body["prompt"])
            blocks = prompt_blocks(body["prompt"], block_size, block_chars)
        n = body.get("n", 1)
        if n != 1:
            raise BadRequest(f"this fake vLLM supports n=1 only; got n={n!r}", param="n")
        max_len = self._max_model_len
        key = "max_tokens"
        max_tokens = body.get("max_tokens")
        if chat and max_tokens is None and body.get("max_completion_tokens") is not None:
            key, max_tokens = "max_completion_tokens", body["max_completion_tokens"]
        if max_tokens is None:
            # vLLM: completions default to 16 tokens, chat to the rest of the context.
            max_tokens = max_len - prompt_tokens if chat else 16
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise BadRequest(f"{key} must be an integer >= 1; got {max_tokens!r}", param=key)
        if prompt_tokens + max_tokens > max_len:
            raise BadRequest(
                f"This model's maximum context length is {max_len} tokens. However, you "
                f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the "
                f"messages, {max_tokens} in the completion). Please reduce the length of the "
                "messages or completion.",
                param=key,
            )
        if body.get("ignore_eos", False):
            output = max_tokens
        else:
            natural = max(1, round(self._rng.expovariate(1.0 / self._mean_output_tokens)))
            output = min(max_tokens, natural)
        stream = bool(body.get("stream", False))
        options = body.get("stream_options")
        if options is not None and not isinstance(options, dict):
            raise BadRequest("stream_options must be an object", param="stream_options")
        include_usage = bool(options and options.get("include_usage"))
        continuous = bool(options and options.get("continuous_usage_stats"))
        if (include_usage or continuous) and not stream:
            raise BadRequest(
                "stream_options may only be set when stream is true", param="stream_options"
            )
        return Job(
            prompt_tokens=prompt_tokens,
            output_tokens=output,
            finish_reason="length" if output == max_tokens else "stop",
            stream=stream,
            include_usage=include_usage,
            continuous_usage=include_usage and continuous,
            model=model if isinstance(model, str) else self._names[0],
            blocks=blocks,
            adapter=model if isinstance(model, str) and model not in self._names else None,
        )
