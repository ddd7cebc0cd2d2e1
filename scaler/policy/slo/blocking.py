"""Requests stuck behind a long prompt on their replica: the heavy tail's cost, pure.

A fleet is not one server ``n`` times as fast. Each request goes to one
replica and waits there for the prompts ahead of it, so a prompt of 80,000
tokens holds up every request behind it on its replica for three seconds
however many replicas stand idle beside it. Where prompts are heavy-tailed
(retrieval, long documents) that, not the fleet's total rate, is what
misses the objective at moderate load, and each added replica buys less
than the last.

Each replica is then an M/G/1 queue of prompt work: requests arrive at
``lambda / n``, each brings its prefill time ``S``. Where the tail is heavy,
a long wait has one cause, a long prompt in service or just ahead, and the
waiting time's tail is (Pakes; Veraverbeke) about::

    P(W > x) ~ (lambda / n) E[(S - x)+] / (1 - rho)

with ``rho`` the replica's load; a request of prefill ``s`` misses when
``W > T - s``. :class:`PromptTail` holds, for each size class of the
prompts seen, its share and ``E[(S - slack)+]``, so that the share blocked
at any ``n`` and load is a sum over eight classes.

Main decision, what the prompt sizes are: the activators count the prompts
over each of :data:`~scaler.policy.api.PROMPT_SIZE_BOUNDS` (1k to 200k
tokens), so the sizes are known by class. Within a class they are taken as
log-uniform (a heavy tail is straight on a log scale); below the first bound
they are one size, the one that makes the classes add up to the tokens
counted. Prompts past the last bound are past any context and refused.
On the long-prompt workload (prompts median 7,000, p99 85,000 tokens) this
predicts every fixed fleet of 3 to 11 replicas within about one point of
its simulated attainment, a little under (least-loaded balancing avoids
some of the queues a random choice would meet).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS

__all__ = ["PromptTail", "prompt_tail"]

# The longest prompt a replica is taken to prefill: 128k tokens, the context of
# most long-context models (Llama 3.1, Qwen 2.5 with YaRN, Mistral Large); the
# server refuses a longer one at once, and it holds no replica up.
_CONTEXT_TOKENS = 131_072.0


@dataclass(frozen=True, slots=True)
class PromptTail:
    """Per size class of servable prompts: ``(share, E[(S - slack)+] in seconds)``."""

    classes: tuple[tuple[float, float], ...] = ()

    def blocked_share(self, per_replica_rate: float, load: float) -> float:
        """The share of servable requests that wait past their slack on a replica that
        receives ``per_replica_rate`` requests a second at ``load`` (its busy share)."""
        if not self.classes or per_replica_rate <= 0:
            return 0.0
        if load >= 1.0:
            return 1.0
        scale = per_replica_rate / (1.0 - load)
        total = 0.0
        for share, excess in self.classes:
            wait = scale * excess
            total += share * (wait if wait < load else load)
        return total


def _excess(a: float, b: float, y: float) -> float:
    """E[(t - y)+] for t log-uniform on [a, b)."""
    if y >= b:
        return 0.0
    m = max(a, y)
    return ((b - m) - y * math.log(b / m)) / math.log(b / a)


def prompt_tail(
    over: Sequence[float],
    requests: float,
    tokens: float,
    *,
    prefill_per_s: float,
    slo_ttft_s: float,
) -> PromptTail:
    """The size classes of ``requests`` prompts of ``tokens`` in all, ``over`` of them
    longer than each of :data:`PROMPT_SIZE_BOUNDS` (module docstring)."""
    bounds = PROMPT_SIZE_BOUNDS
    if len(over) != len(bounds) or requests <= 0 or prefill_per_s <= 0:
        return PromptTail()
    counts = [max(0.0, requests - over[0])]
    counts += [max(0.0, over[k - 1] - over[k]) for k in range(1, len(bounds))]
    spans = [(bounds[k - 1], min(bounds[k], _CONTEXT_TOKENS)) for k in range(1, len(bounds))]
    means = [(b - a) / math.log(b / a) for a, b in spans]
    upper = sum(c * m for c, m in zip(counts[1:], means, strict=True))
    small = min(float(bounds[0]), max(1.0, (tokens - upper) / counts[0])) if counts[0] else 1.0
    total = sum(counts)
    if total <= 0:
        return PromptTail()

    def excess(y: float) -> float:
        """E[(t - y)+] over every counted prompt, in tokens."""
        out = counts[0] * max(0.0, small - y)
        for c, (a, b) in zip(counts[1:], spans, strict=True):
            out += c * _excess(a, b, y)
        return out / total

    limit = prefill_per_s * slo_ttft_s
    classes: list[tuple[float, float]] = []
    servable = 0.0
    for c, size in zip(counts, [small, *means], strict=True):
        if c <= 0 or size >= limit:
            continue
        servable += c
        classes.append((c, excess(limit - size) / prefill_per_s))
    if servable <= 0:
        return PromptTail()
    return PromptTail(tuple((c / servable, e) for c, e in classes))
