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
  so equal hashes mean equal prefixes. The block hashes are Python's own
  ``hash`` of (previous hash, text): salted per process, so they mean
  something only inside one activator (where the router's block index
  lives), and cost a fifth of a cryptographic hash per block (11 against
  48 microseconds for a 6 kB chat), which is most of what prefix routing
  adds to a request.
- **The anchor** (what the ring hashes): the blocks through the system
  messages and one more, i.e. the start of the conversation. Every turn of
  one conversation shares it; different conversations behind the same
  system prompt do not. Every activator must place an anchor on the same
  replica, so its key (``anchor_key``) is BLAKE2b of the anchor's text, the
  same in every process.

A body with neither field (or an unexpected shape) gives no blocks, and
the request is balanced by load as usual.

The same body also gives the scaler its token counts for a model sized in
tokens (:func:`estimated_tokens`): an *estimate* of the prompt's tokens, one
per four characters (the usual rule for English; the scaler rescales it to
the servers' own count where they publish one), four more per chat message
for its template, a token-id prompt's ids exactly; and ``max_tokens`` (or
``max_completion_tokens``) as asked, 0 when absent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BLOCK_CHARS",
    "CHARS_PER_TOKEN",
    "PromptBlocks",
    "estimated_tokens",
    "prompt_blocks",
]

BLOCK_CHARS = 256
#: Characters per prompt token in the estimate (see the module docstring).
CHARS_PER_TOKEN = 4
_CHAT_TOKENS_PER_MESSAGE = 4
_SEPARATOR = "\x1e"  # ASCII record separator: never ends a role or starts a message's text


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    blocks: tuple[int, ...]  # chained hashes, meaningful within this process only
    anchor: int  # leading blocks the ring hashes
    anchor_key: int = 0  # the ring's key for them, the same in every process


def _content(value: object) -> str:
    if isinstance(value, str):
        return value
    # Content parts (text, images by URL): their JSON, stable for equal parts.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _chained(text: str, block_chars: int, anchor: int) -> PromptBlocks:
    out: list[int] = []
    previous = 0
    # Cut the text, not the bytes: a block boundary never splits a character.
    for start in range(0, len(text) - block_chars + 1, block_chars):
        previous = hash((previous, text[start : start + block_chars]))
        out.append(previous)
    if not out:
        return PromptBlocks((), 0)
    anchor = min(anchor, len(out))
    head = text[: anchor * block_chars].encode("utf-8", "surrogatepass")
    key = int.from_bytes(hashlib.blake2b(head, digest_size=8).digest(), "big")
    return PromptBlocks(tuple(out), anchor, key)


def prompt_blocks(document: object, block_chars: int = BLOCK_CHARS) -> PromptBlocks:
    """The prompt of a parsed request body as blocks (empty when it has none)."""
    if not isinstance(document, dict):
        return PromptBlocks((), 0)
    messages = document.get("messages")
    if isinstance(messages, list):
        return _chat(messages, block_chars)
    prompt = document.get("prompt")
    if isinstance(prompt, str):
        return _chained(prompt, block_chars, 1)
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return _chained(_SEPARATOR.join(prompt), block_chars, 1)
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
    return _chained("".join(parts), block_chars, system_chars // block_chars + 1)


def _text_chars(content: object) -> int:
    """Characters of a message's text: a string, or the text parts of a list."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(
            len(part["text"])
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return 0


def estimated_tokens(document: object) -> tuple[int, int]:
    """(estimated prompt tokens, ``max_tokens`` asked) of a parsed request body."""
    if not isinstance(document, dict):
        return 0, 0
    prompt = 0
    messages = document.get("messages")
    if isinstance(messages, list):
        chars = sum(_text_chars(m.get("content")) for m in messages if isinstance(m, dict))
        prompt = chars // CHARS_PER_TOKEN + _CHAT_TOKENS_PER_MESSAGE * len(messages)
    else:
        raw = document.get("prompt")
        if isinstance(raw, str):
            prompt = len(raw) // CHARS_PER_TOKEN
        elif isinstance(raw, list) and raw and all(isinstance(p, int) for p in raw):
            prompt = len(raw)  # token ids
        elif isinstance(raw, list):
            prompt = sum(len(p) for p in raw if isinstance(p, str)) // CHARS_PER_TOKEN
    asked = document.get("max_tokens", document.get("max_completion_tokens"))
    output = asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else 0
    return prompt, output
