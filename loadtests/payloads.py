"""Request bodies for the load tests: OpenAI-compatible and KServe v2 (Triton).

Pure (no locust), so the bodies are unit-tested and reusable.

Output length is made exact with ``max_tokens`` plus vLLM's ``ignore_eos``
(the model keeps generating past its end-of-sequence token), because a
latency figure means little if one run generated 5 tokens and the next 500.
Prompt length is approximate for text prompts: ``" hi"`` is one token in the
common BPE and SentencePiece vocabularies, and a chat template adds a few
tokens of its own. ``/v1/completions`` also takes the prompt as token ids,
which makes it exact (``token_ids=True``).

Every prompt starts with a random nonce, so no two requests share a prefix:
with vLLM's prefix caching, repeated prompts would skip most of the prefill
and make time to first token look far better than real traffic gets.
"""

from __future__ import annotations

import random
from typing import Any, Literal

__all__ = [
    "Endpoint",
    "chat_body",
    "completion_body",
    "endpoint_path",
    "make_prompt",
    "make_prompt_token_ids",
    "triton_body",
]

Endpoint = Literal["chat", "completions"]

# Token ids used for exact-length prompts: inside any real vocabulary (the
# smallest common ones have 32,000 entries) and clear of special tokens,
# which sit at the very start or end of a vocabulary.
_TOKEN_ID_RANGE = (1_000, 20_000)


def endpoint_path(endpoint: Endpoint) -> str:
    if endpoint == "chat":
        return "/v1/chat/completions"
    if endpoint == "completions":
        return "/v1/completions"
    raise ValueError(f"unknown endpoint {endpoint!r}; allowed: 'chat', 'completions'")


def make_prompt(tokens: int, rng: random.Random) -> str:
    """About ``tokens`` tokens of text, starting with a nonce (see the module docstring)."""
    if tokens < 1:
        raise ValueError(f"prompt tokens must be >= 1, got {tokens}")
    nonce = f"{rng.randrange(10**8):08d}"
    # The nonce takes a few tokens itself; the filler makes up the rest.
    return nonce + " hi" * max(tokens - 4, 0)


def make_prompt_token_ids(tokens: int, rng: random.Random) -> list[int]:
    """Exactly ``tokens`` random token ids (for ``/v1/completions``)."""
    if tokens < 1:
        raise ValueError(f"prompt tokens must be >= 1, got {tokens}")
    low, high = _TOKEN_ID_RANGE
    return [rng.randrange(low, high) for _ in range(tokens)]


def _generation_fields(*, output_tokens: int, stream: bool) -> dict[str, Any]:
    if output_tokens < 1:
        raise ValueError(f"output tokens must be >= 1, got {output_tokens}")
    fields: dict[str, Any] = {
        "max_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": stream,
    }
    if stream:
        # One last event carries usage.completion_tokens: the exact count.
        fields["stream_options"] = {"include_usage": True}
    return fields


def chat_body(
    *, model: str, prompt_tokens: int, output_tokens: int, stream: bool, rng: random.Random
) -> dict[str, Any]:
    """A ``/v1/chat/completions`` body with one user message."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": make_prompt(prompt_tokens, rng)}],
        **_generation_fields(output_tokens=output_tokens, stream=stream),
    }


def completion_body(
    *,
    model: str,
    prompt_tokens: int,
    output_tokens: int,
    stream: bool,
    rng: random.Random,
    token_ids: bool = False,
) -> dict[str, Any]:
    """A ``/v1/completions`` body; ``token_ids`` sends the prompt as exact token ids."""
    prompt: str | list[int] = (
        make_prompt_token_ids(prompt_tokens, rng) if token_ids else make_prompt(prompt_tokens, rng)
    )
    return {
        "model": model,
        "prompt": prompt,
        **_generation_fields(output_tokens=output_tokens, stream=stream),
    }


def triton_body(
    *,
    prompt_tokens: int,
    output_tokens: int,
    rng: random.Random,
    text_input: str = "text_input",
    max_tokens_input: str = "max_tokens",
) -> dict[str, Any]:
    """A KServe v2 ``/v2/models/{m}/infer`` body with JSON tensors.

    The input names follow Triton's LLM conventions (TensorRT-LLM's ensemble
    and the vLLM backend: a BYTES ``text_input`` and an INT32 ``max_tokens``);
    an empty ``max_tokens_input`` leaves that tensor out for models that
    have none.
    """
    inputs: list[dict[str, Any]] = [
        {
            "name": text_input,
            "datatype": "BYTES",
            "shape": [1, 1],
            "data": [make_prompt(prompt_tokens, rng)],
        }
    ]
    if max_tokens_input:
        if output_tokens < 1:
            raise ValueError(f"output tokens must be >= 1, got {output_tokens}")
        inputs.append(
            {
                "name": max_tokens_input,
                "datatype": "INT32",
                "shape": [1, 1],
                "data": [output_tokens],
            }
        )
    return {"inputs": inputs}
