"""A request body's prompt as chained block hashes, for prefix-aware balancing.

:mod:`activator.balancing.prefix_affinity` routes by a prompt's blocks; this module
makes them from an OpenAI-style JSON body the activator has parsed:
``messages`` (chat completions) or ``prompt`` (completions, a string or a
list of strings).

- **Text, not tokens.** The activator has no tokenizer. The prompt is
  serialized (each message as its role, its content and a separator, so
  that turn *k*'s messages serialize to a prefix of turn *k+1*'s) and cut
  into :data:`BLOCK_CHARS`-character blocks, full blocks only, as vLLM
  caches full blocks only. 256 characters are about 64 tokens of English
  (four of vLLM's 16-token blocks): fine enough that a turn's tip lies within
  a message or two of where vLLM's cache ends, coarse enough that a
  100,000-character prompt costs 400 hashes (~0.3 ms).
- **Chained.** Block *i*'s hash covers block *i-1*'s hash and its own text,
  so equal hashes mean equal prefixes, and two activators (any process:
  BLAKE2b, not Python's salted ``hash``) compute the same ones.
- **The anchor** (what the ring hashes): the blocks through the system
  messages and one more, i.e. the start of the conversation. Every turn of
  one conversation shares it; different conversations behind the same
  system prompt do not.

A body with neither field (or an unexpected shape) gives no blocks, and
the request is balanced by load as usual.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BLOCK_CHARS", "PromptBlocks", "prompt_blocks"]

BLOCK_CHARS = 256
_SEPARATOR = "\x1e"  # ASCII record separator: never ends a role or starts a message's text


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    blocks: tuple[int, ...]
    anchor: int  # leading blocks the ring hashes


def _content(value: object) -> str:
    if isinstance(value, str):
        return value
    # Content parts (text, images by URL): their JSON, stable for equal parts.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _chained(text: str, block_chars: int) -> tuple[int, ...]:
    out: list[int] = []
    previous = b""
    # Cut the text, not the bytes: a block boundary never splits a character.
    for start in range(0, len(text) - block_chars + 1, block_chars):
        chunk = text[start : start + block_chars].encode("utf-8", "surrogatepass")
        previous = hashlib.blake2b(previous + chunk, digest_size=8).digest()
        out.append(int.from_bytes(previous, "big"))
    return tuple(out)


def prompt_blocks(document: object, block_chars: int = BLOCK_CHARS) -> PromptBlocks:
    """The prompt of a parsed request body as blocks (empty when it has none)."""
    if not isinstance(document, dict):
        return PromptBlocks((), 0)
    messages = document.get("messages")
    if isinstance(messages, list):
        return _chat(messages, block_chars)
    prompt = document.get("prompt")
    if isinstance(prompt, str):
        return PromptBlocks(_chained(prompt, block_chars), 1)
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return PromptBlocks(_chained(_SEPARATOR.join(prompt), block_chars), 1)
    return PromptBlocks((), 0)


def _chat(messages: Sequence[object], block_chars: int) -> PromptBlocks:
    parts: list[str] = []
    system_chars = 0
    leading_system = True
    for message in messages:
        if not isinstance(message, dict):
            return PromptBlocks((), 0)
        role = message.get("role")
        text = f"{role}{_SEPARATOR}{_content(message.get('content'))}{_SEPARATOR}"
        parts.append(text)
        if leading_system and role in ("system", "developer"):
            system_chars += len(text)
        else:
            leading_system = False
    blocks = _chained("".join(parts), block_chars)
    return PromptBlocks(blocks, system_chars // block_chars + 1)
