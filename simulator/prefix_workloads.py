"""Synthetic workloads that share prompt prefixes other than as one chat, with block ids.

:mod:`simulator.chat_trace` is a chat: turn *k+1* contains turn *k*.
Production traffic shares prefixes in other ways too, and these three
generators make them, seeded, each request carrying its prompt as block ids
(``block_tokens`` per block, full blocks only, equal ids equal prefixes):

- **documents** (RAG, "chat with a document"): each request is a shared
  system prompt, one document and a new question. Documents are drawn from
  a fixed set with Zipf popularity (exponent 1.0: with 2,000 documents the
  top 3 % draw 57 % of requests, the skew RAGCache reports for Wikipedia
  retrieval, where the top 3 % of documents took 60 % of requests; Jin et
  al., "RAGCache", 2024, §3). Document length log-normal, mean 3,000
  tokens (the retrieved contexts CacheBlend evaluates on are 2,000 to
  4,000 tokens; Yao et al., EuroSys 2025); questions mean 60 tokens,
  answers mean 150. One document per request: a retrieval of several
  documents in changing order shares only the first one's prefix, which
  this leaves out.
- **agents**: each task is a loop of steps over a long tool-definition
  system prompt (2,000 tokens, shared by every task); each step re-sends the
  whole history and appends the model's action (mean 150 tokens) and the
  tool's output (mean 1,000 tokens); a task goes on after each step with
  probability 0.95 (mean 20 steps, capped at 60), the next step 5 s on
  average after the previous one (model plus tool time). These are
  assumptions in the range published coding-agent trajectories show
  (tens of steps, contexts growing to tens of thousands of tokens), not
  fitted to one dataset.
- **few-shot**: each request is one of a few long task prompts (8 of them,
  3,000 tokens of instructions and examples each, picked uniformly) and a
  short new input (mean 100 tokens), answers mean 100: the shape of a
  classification or extraction service. An assumption, as is the number
  of templates.

Arrivals are Poisson at ``rate_per_s`` (requests for documents and
few-shot, tasks for agents). Token counts are log-normal with sigma 1.0
(0.5 for documents and the few-shot prompts, whose sizes vary less),
clamped to ``[1, 16,000]``.

Main decision: block ids are tuples naming what the block holds (the
system prompt's j-th block, document d's j-th block after the system
prompt, a request's own j-th block), so equal ids mean equal prefixes, as
the engine's cache and the router require: a block is only ever reached
through the same blocks before it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from simulator.traces import TraceRequest

__all__ = ["WORKLOADS", "WorkloadSpec", "anchor_of", "generate_workload"]

_SIGMA = 1.0
_MAX_TOKENS = 16_000

_SYSTEM_TOKENS = 64
_DOCUMENTS = 2_000
_ZIPF = 1.0
_DOCUMENT_MEAN = 3_000.0
_QUESTION_MEAN = 60.0
_DOCUMENT_ANSWER_MEAN = 150.0

_TOOLS_TOKENS = 2_000
_AGENT_CONTINUE = 0.95
_AGENT_MAX_STEPS = 60
_ACTION_MEAN = 150.0
_TOOL_OUTPUT_MEAN = 1_000.0
_STEP_GAP_S = 5.0
_AGENT_CONTEXT = 60_000  # a task ends before its history outgrows a long context

_TEMPLATES = 8
_TEMPLATE_MEAN = 3_000.0
_INPUT_MEAN = 100.0
_FEW_SHOT_ANSWER_MEAN = 100.0


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    kind: str
    duration_s: float = 600.0
    rate_per_s: float = 20.0
    block_tokens: int = 16
    seed: int = 1

    def __post_init__(self) -> None:
        if self.kind not in WORKLOADS:
            raise ValueError(f"unknown workload {self.kind!r}; choose from {sorted(WORKLOADS)}")
        for name in ("duration_s", "rate_per_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"WorkloadSpec.{name} must be a number > 0, got {value!r}")
        if self.block_tokens < 1:
            raise ValueError(f"WorkloadSpec.block_tokens must be >= 1, got {self.block_tokens}")


def _lognormal(rng: random.Random, mean: float, sigma: float = _SIGMA) -> int:
    # A log-normal's mean is exp(mu + sigma^2 / 2): solve for mu.
    mu = math.log(mean) - sigma**2 / 2
    return max(1, min(_MAX_TOKENS, round(rng.lognormvariate(mu, sigma))))


def _arrivals(rng: random.Random, spec: WorkloadSpec) -> list[float]:
    out: list[float] = []
    at = rng.expovariate(spec.rate_per_s)
    while at < spec.duration_s:
        out.append(at)
        at += rng.expovariate(spec.rate_per_s)
    return out


def _blocks(segments: list[tuple[object, int]], block: int) -> tuple[int | str, ...]:
    """Block ids of a prompt made of named segments (name, tokens), full blocks only.

    A block is named by the segment it ends in and its index there, with the
    segments before it: ``repr`` of that path, so ids stay plain strings.
    """
    ids: list[int | str] = []
    path: list[str] = []
    offset = 0
    for name, tokens in segments:
        path.append(repr(name))
        start = offset
        offset += tokens
        # Block j ends at (j + 1) x block: within this segment from start // block on.
        for j in range(start // block, offset // block):
            ids.append(f"{'/'.join(path)}#{j}")
    return tuple(ids)


def _documents(spec: WorkloadSpec, rng: random.Random) -> list[TraceRequest]:
    weights = [1.0 / (k + 1) ** _ZIPF for k in range(_DOCUMENTS)]
    lengths = [_lognormal(rng, _DOCUMENT_MEAN, 0.5) for _ in range(_DOCUMENTS)]
    out = []
    for i, at in enumerate(_arrivals(rng, spec)):
        doc = rng.choices(range(_DOCUMENTS), weights)[0]
        question = _lognormal(rng, _QUESTION_MEAN)
        segments: list[tuple[object, int]] = [
            ("system", _SYSTEM_TOKENS),
            (("doc", doc), lengths[doc]),
            (("q", i), question),
        ]
        prompt = _SYSTEM_TOKENS + lengths[doc] + question
        out.append(
            TraceRequest(
                offset_s=at,
                prompt_tokens=prompt,
                output_tokens=_lognormal(rng, _DOCUMENT_ANSWER_MEAN),
                prefix=_blocks(segments, spec.block_tokens),
            )
        )
    return out


def _agents(spec: WorkloadSpec, rng: random.Random) -> list[TraceRequest]:
    out = []
    for task, start in enumerate(_arrivals(rng, spec)):
        segments: list[tuple[object, int]] = [("tools", _TOOLS_TOKENS), (("task", task), 200)]
        prompt = _TOOLS_TOKENS + 200
        at = start
        for step in range(_AGENT_MAX_STEPS):
            if at >= spec.duration_s or prompt >= _AGENT_CONTEXT:
                break
            action = _lognormal(rng, _ACTION_MEAN)
            out.append(
                TraceRequest(
                    offset_s=at,
                    prompt_tokens=prompt,
                    output_tokens=action,
                    prefix=_blocks(segments, spec.block_tokens),
                )
            )
            if rng.random() >= _AGENT_CONTINUE:
                break
            tool = _lognormal(rng, _TOOL_OUTPUT_MEAN)
            segments += [(("act", task, step), action), (("tool", task, step), tool)]
            prompt += action + tool
            at += rng.expovariate(1.0 / _STEP_GAP_S)
    out.sort(key=lambda r: r.offset_s)
    return out


def _few_shot(spec: WorkloadSpec, rng: random.Random) -> list[TraceRequest]:
    templates = [_lognormal(rng, _TEMPLATE_MEAN, 0.5) for _ in range(_TEMPLATES)]
    out = []
    for i, at in enumerate(_arrivals(rng, spec)):
        t = rng.randrange(_TEMPLATES)
        new = _lognormal(rng, _INPUT_MEAN)
        segments: list[tuple[object, int]] = [(("template", t), templates[t]), (("in", i), new)]
        out.append(
            TraceRequest(
                offset_s=at,
                prompt_tokens=templates[t] + new,
                output_tokens=_lognormal(rng, _FEW_SHOT_ANSWER_MEAN),
                prefix=_blocks(segments, spec.block_tokens),
            )
        )
    return out


WORKLOADS: dict[str, Callable[[WorkloadSpec, random.Random], list[TraceRequest]]] = {
    "documents": _documents,
    "agents": _agents,
    "few-shot": _few_shot,
}


def generate_workload(spec: WorkloadSpec) -> list[TraceRequest]:
    """The workload's trace, sorted by arrival (see the module docstring)."""
    return WORKLOADS[spec.kind](spec, random.Random(spec.seed))


def anchor_of(request: TraceRequest) -> int | None:
    """Where the activator would anchor this request: its first segment and one block more.

    The activator hashes a chat's system messages and one more block onto
    its ring; these workloads' first segment is that system prompt (the
    shared system prompt, the tool list, the task template). None for a
    request whose blocks are not named by segment (other traces).
    """
    depth = 0
    for block in request.prefix:
        if not isinstance(block, str):
            return None
        if "/" in block:
            break
        depth += 1
    return depth + 1
