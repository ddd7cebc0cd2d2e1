"""A synthetic multi-turn chat trace with prompt block ids, from published statistics.

Real traces with both arrival times and prompt prefixes are rare and big;
this one is generated, seeded, from what chat datasets publish:

- **turns per conversation**: geometric, a conversation going on after each
  turn with probability 0.73, so that 73 % of conversations have more than
  one turn as in ShareGPT (Gao et al., "Cost-Efficient Large Language Model
  Serving for Multi-turn Conversations with CachedAttention", USENIX ATC
  2024, §2); mean 3.7 turns, capped at 20;
- **tokens**: each user message log-normal with mean 69.5 tokens and each
  answer with mean 214.5, LMSYS-Chat-1M's averages per prompt and per
  response (Zheng et al., ICLR 2024, Table 1), spread sigma 1.0 for their
  long tails;
- **the prompt of turn k** is the whole conversation so far (the system
  prompt, every earlier message and answer) plus the new message, as chat
  APIs are called;
- **a system prompt** shared by all conversations (``system_tokens``, 64 by
  default): an assumption; LMSYS conversations carry none, deployed
  assistants nearly always do;
- **conversations start** as a Poisson process at ``conversations_per_s``;
  the next turn comes a **think time** after the previous one (exponential,
  mean ``think_s``, 20 s by default). No public chat dataset we know of
  publishes think times: this is an assumption, and the knob that sets how
  many conversations must stay cached at once (``docs/prefix-routing.md``
  shows its effect).

Each request carries its prompt as block ids, ``block_tokens`` (vLLM's
default block size, 16) per block, full blocks only: the system prompt's
blocks are the same in every conversation, every other block is unique to
its conversation and position, so equal ids mean equal prefixes.

Main decision: the trace is open loop (arrival times fixed in advance, not
waiting for answers), like every trace the simulator replays; a turn's think
time starts from the previous turn's arrival, which is the answer's time
less its latency (seconds, against a think time of tens).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from simulator.traces import TraceRequest

__all__ = ["MEAN_TURNS", "ChatSpec", "generate_chat"]

_CONTINUE = 0.73  # share of ShareGPT conversations with more than one turn
_MAX_TURNS = 20
_USER_MEAN_TOKENS = 69.5  # LMSYS-Chat-1M, per prompt
_ANSWER_MEAN_TOKENS = 214.5  # LMSYS-Chat-1M, per response
_SIGMA = 1.0
_MAX_MESSAGE_TOKENS = 4_000
# Turns per conversation on average (the geometric law's mean, capped), so
# that a rate of requests can be turned into a rate of conversations.
MEAN_TURNS = (1 - _CONTINUE**_MAX_TURNS) / (1 - _CONTINUE)


@dataclass(frozen=True, slots=True)
class ChatSpec:
    duration_s: float = 900.0
    conversations_per_s: float = 4.0
    think_s: float = 20.0
    system_tokens: int = 64
    block_tokens: int = 16
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("duration_s", "conversations_per_s", "think_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"ChatSpec.{name} must be a number > 0, got {value!r}")
        if self.system_tokens < 0:
            raise ValueError(f"ChatSpec.system_tokens must be >= 0, got {self.system_tokens}")
        if self.block_tokens < 1:
            raise ValueError(f"ChatSpec.block_tokens must be >= 1, got {self.block_tokens}")


def _lognormal(rng: random.Random, mean: float) -> int:
    # A log-normal's mean is exp(mu + sigma^2 / 2): solve for mu.
    mu = math.log(mean) - _SIGMA**2 / 2
    return max(1, min(_MAX_MESSAGE_TOKENS, round(rng.lognormvariate(mu, _SIGMA))))


def generate_chat(spec: ChatSpec) -> list[TraceRequest]:
    """The trace, sorted by arrival (see the module docstring)."""
    rng = random.Random(spec.seed)
    block = spec.block_tokens
    system_blocks = spec.system_tokens // block
    out: list[TraceRequest] = []
    start = rng.expovariate(spec.conversations_per_s)
    conversation = 0
    while start < spec.duration_s:
        conversation += 1
        at, history = start, spec.system_tokens
        for _turn in range(_MAX_TURNS):
            if at >= spec.duration_s:
                break
            prompt = history + _lognormal(rng, _USER_MEAN_TOKENS)
            answer = _lognormal(rng, _ANSWER_MEAN_TOKENS)
            full = prompt // block
            ids = tuple(
                -1 - j if j < system_blocks else conversation * 100_000 + j for j in range(full)
            )
            out.append(
                TraceRequest(offset_s=at, prompt_tokens=prompt, output_tokens=answer, prefix=ids)
            )
            if rng.random() >= _CONTINUE:
                break
            history = prompt + answer
            at += rng.expovariate(1.0 / spec.think_s)
        start += rng.expovariate(spec.conversations_per_s)
    out.sort(key=lambda r: r.offset_s)
    return out
