"""The fake vLLM's prompt as cache blocks, for its prefix cache.

vLLM's automatic prefix caching hashes each full block of ``block_size``
prompt tokens (16 by default) together with the hash of the block before
it, and reuses the KV of the longest run of leading blocks it has cached.
This server has no tokenizer (a token is four characters, a chat message
four tokens more for its template: :mod:`loadtests.sandbox.servers.vllm_requests`),
so a text block is ``block_chars`` characters (the caller's ``block_size``
tokens at its characters per token: 64), the chat template's role marker
included, and a token-id prompt's block is ``block_size`` ids.
Hashes are chained, so equal block hashes mean equal prefixes, as in vLLM.
The engine model (``simulator.engine.LlmEngine``) keeps the blocks in LRU
order within its KV cache and skips the prefill of the cached ones.
"""

from __future__ import annotations

import hashlib

__all__ = ["DEFAULT_BLOCK_SIZE", "chat_blocks", "prompt_blocks"]

DEFAULT_BLOCK_SIZE = 16  # vLLM's --block-size default on CUDA


def _chain(pieces: list[bytes]) -> tuple[bytes, ...]:
    out: list[bytes] = []
    previous = b""
    for piece in pieces:
        previous = hashlib.blake2b(previous + piece, digest_size=8).digest()
        out.append(previous)
    return tuple(out)


def _text_blocks(text: str, width: int) -> tuple[bytes, ...]:
    full = len(text) // width
    return _chain([text[i * width : (i + 1) * width].encode() for i in range(full)])


def chat_blocks(messages: list[dict[str, object]], block_chars: int) -> tuple[bytes, ...]:
    """A validated chat's blocks: each message as a role marker then its text."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                str(p["text"]) for p in content if isinstance(p, dict) and "text" in p
            )
        parts.append(f"<|{message.get('role')}|>{content or ''}")
    return _text_blocks("".join(parts), block_chars)


def prompt_blocks(prompt: object, block_size: int, block_chars: int) -> tuple[bytes, ...]:
    """A validated completions prompt's blocks (text, token ids, or a list of one)."""
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if isinstance(prompt, str):
        return _text_blocks(prompt, block_chars)
    if isinstance(prompt, list):
        ids = [int(t) for t in prompt]
        full = len(ids) // block_size
        return _chain(
            [
                b",".join(str(t).encode() for t in ids[i * block_size : (i + 1) * block_size])
                for i in range(full)
            ]
        )
    return ()
