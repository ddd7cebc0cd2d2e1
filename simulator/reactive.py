"""The reactive oracle: the best a purely reactive policy can do, and the fleet a start needs.

``reactive`` is a yardstick no reader can call clairvoyant. At every
simulated second it asks for exactly the replicas the second just ended
needed, the demand read off the trace itself (measured perfectly, with no
forecast): a replica asked for is ready one cold start later, as any
other, and a replica no longer needed is released only after a break-even
idle time, the cold start (keeping an idle replica that long costs the GPU
what starting it again would; ski rental's break-even rule).

The demand of second ``s`` (:func:`demand_per_second`), from the requests
present then if each were served as fast as the engine allows and decoded
at the inter-token objective (:data:`simulator.profile.DEFAULT_ITL_S`,
Dynamo's 50 ms): the prompts arriving within the second must be
prefilled, and the sequences present must fit ``max_num_seqs`` and the KV
cache, and step at least once per objective::

    replicas = ceil(max((P / prefill_tokens_per_s + step_per_seq_s x n / itl)
                        / (1 - step_base_s / itl),
                        n / max_num_seqs, K / kv_cache_tokens))

with ``P`` the prompt tokens arriving in the second, ``n`` the sequences
present (from arrival to the last token at that pace) and ``K`` their
prompt and output tokens; at least one while any is present. It is the
phase model of the capacity policy (prefill within the TTFT objective,
decode within an inter-token objective) with perfect knowledge of the
present and none of the future.

Main decision: the same demand sizes the warm start every row is given
(``--start warm``): the most replicas any second of the first minute
needs (:func:`first_minute_fleet`).
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Sequence

from simulator.engine import LlmParams
from simulator.profile import DEFAULT_ITL_S
from simulator.traces import TraceRequest
from simulator.world import View

__all__ = ["FIRST_MINUTE_S", "Reactive", "demand_per_second", "first_minute_fleet"]

FIRST_MINUTE_S = 60

_EPSILON = 1e-9


def demand_per_second(
    requests: Sequence[TraceRequest], params: LlmParams, *, itl_s: float = DEFAULT_ITL_S
) -> list[int]:
    """Replicas each whole second of the trace needs (see the module docstring)."""
    if not requests:
        return []
    step_share = params.step_base_s / itl_s
    if step_share >= 1:
        raise ValueError(
            f"a step ({params.step_base_s * 1000:g} ms) is longer than the inter-token "
            f"objective ({itl_s * 1000:g} ms): no replica can decode within it"
        )
    # Per second: prompt tokens arriving, and the change in sequences present
    # and in their tokens (a difference array, summed below).
    # Packed: a day's trace is millions of requests.
    ends = array(
        "d",
        (
            r.offset_s + _prefill_s(r.prompt_tokens, params) + max(0, r.output_tokens - 1) * itl_s
            for r in requests
        ),
    )
    length = math.floor(max(ends)) + 2
    prompts = [0] * length
    seqs = [0] * (length + 1)
    tokens = [0] * (length + 1)
    for r, end in zip(requests, ends, strict=True):
        first, last = math.floor(r.offset_s), math.floor(end)
        prompts[first] += max(1, r.prompt_tokens)
        seqs[first] += 1
        seqs[last + 1] -= 1
        held = max(1, r.prompt_tokens) + max(1, r.output_tokens)
        tokens[first] += held
        tokens[last + 1] -= held
    out: list[int] = []
    present = kv = 0
    for second in range(length):
        present += seqs[second]
        kv += tokens[second]
        work = prompts[second] / params.prefill_tokens_per_s + (
            params.step_per_seq_s * present / itl_s
        )
        need = max(
            work / (1 - step_share),
            present / params.max_num_seqs,
            kv / params.kv_cache_tokens,
        )
        out.append(max(1 if present else 0, math.ceil(need - _EPSILON)))
    return out


def _prefill_s(prompt: int, params: LlmParams) -> float:
    tokens = max(1, prompt)
    steps = math.ceil(tokens / params.max_num_batched_tokens)
    return steps * params.step_base_s + tokens / params.prefill_tokens_per_s


def first_minute_fleet(demand: Sequence[int], max_replicas: int) -> int:
    """The replicas a warm start gives: what the busiest second of the first minute needs."""
    return min(max_replicas, max(demand[:FIRST_MINUTE_S], default=0))


class Reactive:
    """The reactive oracle for one model (see the module docstring)."""

    def __init__(self, demand: Sequence[int], *, break_even_s: float, max_replicas: int) -> None:
        if break_even_s < 0:
            raise ValueError(f"the break-even idle time must be >= 0 s, got {break_even_s}")
        self.demand = list(demand)
        self.keep = max(1, math.ceil(break_even_s) + 1)
        self.max_replicas = max_replicas
        self.recent: deque[tuple[int, int]] = deque()  # (second, demand), a sliding maximum
        self.started = False

    @property
    def name(self) -> str:
        return "reactive"

    @property
    def initial(self) -> int:
        return 0

    def tick(self, view: View, *, activation: bool) -> int | None:
        # The second that just ended: at time s the arrivals of [s, s + 1) are future.
        second = math.floor(view.now) - 1
        need = self.demand[second] if 0 <= second < len(self.demand) else 0
        if activation:
            return max(1, min(need, self.max_replicas))
        recent = self.recent
        if not self.started:
            # The replicas the run starts with count as asked for at time 0.
            self.started = True
            recent.append((second, view.spec))
        while recent and recent[-1][1] <= need:
            recent.pop()
        recent.append((second, need))
        while recent[0][0] <= second - self.keep:
            recent.popleft()
        return min(recent[0][1], self.max_replicas)
