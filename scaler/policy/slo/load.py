"""Load in tokens and the prompt-only capacity learned: pure, time passed in.

SLO-first scaling sizes a model in tokens, not requests: one request of a
code assistant is 200 tokens and the next 50,000, and a replica's time to
first token depends on the tokens ahead of a prompt, not on how many
requests they came in. Two pieces, each a frozen value the policy state
carries from one decision to the next:

- :class:`Capacity`: the prompt tokens per second one replica prefills,
  from the prompt side alone, until the step model of both phases
  (:mod:`scaler.policy.slo.phases`) has seen enough busy time to replace it.
  A *saturated* interval (at least four requests per ready replica waiting
  for their first token at both its ends, the same replicas ready
  throughout) shows the most a replica does: the prompt tokens whose first
  token came back (the counters the activators and vLLM's
  ``prompt_tokens_total`` publish) per second per ready replica, as a ratio
  of sums over the last minute or so of saturated replica-seconds. Before
  the first, a prior of :data:`PRIOR_PREFILL_TOKENS_PER_S` (an 8B model on
  one H100 prefills about 25,000; a 70B on two, about 6,000), raised by the
  fastest prefill any request has shown (its prompt tokens over the time
  from reaching a replica to its first token: no replica is slower than
  that), so a model whose traffic never saturates a replica is not sized
  on a prior set too low; thirty saturated replica-seconds replace both.
- :class:`LoadHistory`: what arrived, per decision interval, over the last
  :data:`LOOKBACK_S` seconds (prompt tokens, tokens to generate, requests,
  prompts over each size bound): the model's own history, from which the
  load over the next cold start is forecast
  (:func:`~scaler.policy.slo.sizing.replicas_for`).

Main decision, the witnesses of the load: the activators' counts at arrival
for the timing, rescaled to the servers' counts for the size
(:func:`with_interval`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import itemgetter

from scaler.policy.api import LoadTotals

__all__ = [
    "LOOKBACK_S",
    "PRIOR_PREFILL_TOKENS_PER_S",
    "Capacity",
    "Interval",
    "LoadHistory",
    "estimate_scale",
    "fewest",
    "learn_capacity",
    "saturated_sample",
    "with_interval",
]

#: Prompt tokens per second per replica assumed before the first saturated
#: interval (see the module docstring): between a 70B and an 8B model, so a
#: wrong prior costs at most a few replicas for one wake.
PRIOR_PREFILL_TOKENS_PER_S = 12_000.0

#: How far back the history reaches (see the module docstring).
LOOKBACK_S = 1800.0

# Requests waiting for a first token per ready replica, at both ends of an
# interval, for it to count as saturated: with fewer, the balancer's choices
# leave some replica idle part of the time (two or three waiting per replica
# read as half the capacity on the code trace; four or more within 15 %).
_SATURATED_PER_REPLICA = 4
# KV-cache use at which vLLM preempts (see saturated_sample).
_KV_THRASH = 0.9
# Saturated replica-seconds before their rate replaces the prior. A prompt's
# tokens count when its first token comes back, so a short saturated spell
# reads low: its intervals hold long prompts still prefilling, and the tokens
# land after it, when fewer wait and the interval no longer counts. With 10 s,
# a model that saturates only in short bursts (synthetic:bursts) learned
# 15,700 tokens/s of a replica's 25,000 from one burst and kept a second
# replica for minutes (1.18 GPU-h over seeds 1-3 against 1.00, the same
# attainment); 30 s keeps the fastest prefill seen until saturation has
# lasted long enough for the tokens it delays to land within it.
_TRUSTED_REPLICA_S = 30.0
# The saturated replica-seconds the capacity remembers (older ones fade):
# long enough to span a few long prompts, short enough to follow a change of
# model or of prompt mix within minutes of saturation.
_MEMORY_REPLICA_S = 60.0
# The servers' prompt tokens counted before they rescale the activators'
# estimate (a few long prompts, so one in flight does not skew the ratio much),
# and the bounds of the scale: characters over four is within a factor of two
# of a tokenizer's count for text and code; a ratio outside says the two count
# different traffic (some of it bypasses the activators), not a different text.
_SCALE_AFTER_TOKENS = 100_000.0
_SCALE_RANGE = (0.5, 2.0)
# Generated over asked below this: the activators' max_tokens overstate the
# answers (in-flight answers alone keep the ratio a little under 1).
_ASKED_OVERSTATES = 0.7


@dataclass(frozen=True, slots=True)
class Capacity:
    """Prompt tokens per second one replica prefills (see the module docstring).

    A ratio of decayed sums, prefilled tokens over saturated replica-seconds,
    not a mean of per-interval rates: a long prompt is counted when its first
    token comes back, so one interval shows none of its tokens and the next
    all of them, and only the sums see the rate between.
    """

    tokens_per_s: float = PRIOR_PREFILL_TOKENS_PER_S
    samples: int = 0
    tokens: float = 0.0
    replica_seconds: float = 0.0

    def at_least(self, fastest_tokens_per_s: float) -> Capacity:
        """Until enough saturated time is seen, the fastest prefill a request has shown
        is a lower bound that lifts a prior set too low."""
        if self.trusted or not fastest_tokens_per_s > self.tokens_per_s:
            return self
        return Capacity(fastest_tokens_per_s, self.samples, self.tokens, self.replica_seconds)

    @property
    def trusted(self) -> bool:
        """Enough saturated replica-seconds for their rate to replace the prior."""
        return self.replica_seconds >= _TRUSTED_REPLICA_S

    def learn(self, tokens: float, replica_seconds: float) -> Capacity:
        if not (tokens >= 0 and replica_seconds > 0 and math.isfinite(tokens + replica_seconds)):
            return self
        keep = math.exp(-replica_seconds / _MEMORY_REPLICA_S)
        total = self.tokens * keep + tokens
        spent = self.replica_seconds * keep + replica_seconds
        learned = Capacity(self.tokens_per_s, self.samples + 1, total, spent)
        if not learned.trusted or total <= 0:
            return learned
        return Capacity(total / spent, learned.samples, total, spent)


def fewest(a: float | None, b: float | None) -> float | None:
    """The smaller of two readings of a level, ``None`` unless both were measured."""
    return None if a is None or b is None else min(a, b)


def saturated_sample(
    before: LoadTotals, after: LoadTotals, *, interval_s: float, ready_before: int, ready: int
) -> tuple[float, float] | None:
    """Prompt tokens prefilled and replica-seconds spent over an interval in which every
    ready replica had work waiting throughout; ``None`` when the interval shows no such
    thing."""
    if interval_s <= 0 or ready < 1 or ready != ready_before:
        return None
    if (
        min(before.awaiting_first_token, after.awaiting_first_token)
        < _SATURATED_PER_REPLICA * ready
    ):
        return None
    # Every replica with a queue, where the servers say: the sums alone read
    # long queues on some replicas beside idle others as saturation.
    queued = fewest(before.waiting_least, after.waiting_least)
    if queued is not None and queued < 1:
        return None
    # A full KV cache preempts sequences and computes their prompts again: the
    # replicas are thrashing, and more of them would not.
    if max(before.kv_cache_utilization or 0.0, after.kv_cache_utilization or 0.0) >= _KV_THRASH:
        return None
    # Two witnesses of the same work (the activators' first tokens, the servers'
    # counters): the larger, since either may be missing.
    done = max(
        after.prefilled_tokens - before.prefilled_tokens,
        after.served_prompt_tokens - before.served_prompt_tokens,
    )
    if done < 0:
        return None
    return done, interval_s * ready


#: One decision interval of the history: ``(start_s, end_s, prompt_tokens, requests,
#: output_tokens, prompts_over)``, the last the arrivals over each of
#: :data:`~groundwork.rules.prompt_sizes.PROMPT_SIZE_BOUNDS` (empty where none are counted).
Interval = tuple[float, float, float, float, float, tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class LoadHistory:
    """Arrivals per decision interval (:data:`Interval`) over the last
    :data:`LOOKBACK_S` seconds, oldest first."""

    intervals: tuple[Interval, ...] = ()

    def add(
        self,
        start_s: float,
        end_s: float,
        tokens: float,
        requests: float,
        output: float = 0.0,
        over: tuple[float, ...] = (),
    ) -> LoadHistory:
        if end_s <= start_s:
            return self
        horizon = end_s - LOOKBACK_S
        kept = self.intervals
        drop = 0
        while drop < len(kept) and kept[drop][1] <= horizon:
            drop += 1
        interval = (
            start_s,
            end_s,
            max(0.0, tokens),
            max(0.0, requests),
            max(0.0, output),
            tuple(max(0.0, c) for c in over),
        )
        return LoadHistory((*kept[drop:], interval))

    def since(self, start_s: float) -> LoadHistory:
        """The intervals that end after ``start_s``."""
        kept = self.intervals
        drop = 0
        while drop < len(kept) and kept[drop][1] <= start_s:
            drop += 1
        return self if drop == 0 else LoadHistory(kept[drop:])

    @property
    def requests(self) -> float:
        return _column_sum(self.intervals, 3)

    @property
    def tokens(self) -> float:
        return _column_sum(self.intervals, 2)

    @property
    def prompts_over(self) -> tuple[float, ...]:
        """The arrivals over each prompt size bound, summed (empty where none are counted)."""
        counted = list(filter(None, map(itemgetter(5), self.intervals)))
        if not counted:
            return ()
        width = len(counted[-1])
        if len(set(map(len, counted))) > 1:
            counted = [c for c in counted if len(c) == width]
        # A column at a time: zip(*counted) would make an iterator per interval.
        return tuple(sum(map(itemgetter(k), counted)) for k in range(width))

    @property
    def output_tokens(self) -> float:
        return _column_sum(self.intervals, 4)

    @property
    def span_s(self) -> float:
        if not self.intervals:
            return 0.0
        return self.intervals[-1][1] - self.intervals[0][0]

    def request_rate(self) -> float:
        """Requests per second over the history (0 without one)."""
        span = self.span_s
        return self.requests / span if span > 0 else 0.0


def _column_sum(intervals: tuple[Interval, ...], k: int) -> float:
    """The sum of one field of the intervals, oldest first (as a loop would add them)."""
    total: float = sum(map(itemgetter(k), intervals))
    return total


def estimate_scale(totals: LoadTotals) -> float:
    """What the activators' prompt-token estimate is multiplied by: the servers' own
    count over the estimate, once the servers have counted :data:`_SCALE_AFTER_TOKENS`
    (1 before, or where no server counts), within :data:`_SCALE_RANGE`."""
    if totals.served_prompt_tokens < _SCALE_AFTER_TOKENS or totals.prompt_tokens <= 0:
        return 1.0
    lo, hi = _SCALE_RANGE
    return min(hi, max(lo, totals.served_prompt_tokens / totals.prompt_tokens))


def with_interval(
    history: LoadHistory, before: LoadTotals | None, after: LoadTotals, start_s: float, now: float
) -> LoadHistory:
    """``history`` with the arrivals between two counter readings (a first reading adds
    nothing: its counters hold everything before it).

    The two witnesses of a prompt's tokens each have a flaw. The activators'
    count comes at *arrival*, the timing the queue replay needs, but it is an
    estimate (characters over four: no tokenizer in the data path). The
    servers' count (vLLM's ``prompt_tokens_total``) is exact but comes at
    *prefill*: a queue's tokens show up at the rate they are served, never
    faster, so a replay of it would never see the queue. So: the activators'
    count for the timing, rescaled by the servers' count for the size
    (:func:`estimate_scale`, the ratio of the two totals since the hub began
    counting: in-flight prompts are a small share of it once
    :data:`_SCALE_AFTER_TOKENS` are served). Without activator counts (traffic
    that reaches the servers directly) the servers' count stands, and the
    requests whose first token came back are the count; a server that counts no
    tokens (Triton) leaves the activators' estimate as it is.
    """
    if before is None:
        return history
    over: tuple[float, ...] = ()
    if len(after.prompts_over) == len(before.prompts_over):
        over = tuple(a - b for a, b in zip(after.prompts_over, before.prompts_over, strict=True))
    elif not before.prompts_over:
        over = after.prompts_over
    output = _output_tokens(before, after)
    if after.prompt_tokens > 0:
        tokens = (after.prompt_tokens - before.prompt_tokens) * estimate_scale(after)
        requests = after.arrivals - before.arrivals
    else:
        tokens = max(
            after.served_prompt_tokens - before.served_prompt_tokens,
            after.prefilled_tokens - before.prefilled_tokens,
        )
        requests = max(after.arrivals - before.arrivals, after.first_tokens - before.first_tokens)
    return history.add(start_s, now, tokens, requests, output, over)


def _output_tokens(before: LoadTotals, after: LoadTotals) -> float:
    """The interval's tokens to generate: the activators' ``max_tokens`` at arrival,
    scaled down where the servers' generated count shows answers far shorter than
    asked (a ceiling, often a generous one); the servers' count where no activator
    counts them."""
    asked = after.output_tokens - before.output_tokens
    if after.output_tokens <= 0:
        return max(0.0, after.generated_tokens - before.generated_tokens)
    if after.generated_tokens >= _SCALE_AFTER_TOKENS:
        ratio = after.generated_tokens / after.output_tokens
        if ratio < _ASKED_OVERSTATES:
            return asked * max(_SCALE_RANGE[0] / 10, ratio)
    return asked


def learn_capacity(
    capacity: Capacity,
    before: LoadTotals | None,
    after: LoadTotals,
    *,
    interval_s: float,
    ready_before: int,
    ready: int,
) -> Capacity:
    """``capacity`` with the interval's saturated sample, if it has one."""
    capacity = capacity.at_least(after.best_prefill_tokens_per_s)
    if before is None:
        return capacity
    sample = saturated_sample(
        before, after, interval_s=interval_s, ready_before=ready_before, ready=ready
    )
    return capacity if sample is None else capacity.learn(*sample)
