"""One engine alone on a simulated clock: a list of arrivals in, each request's times out.

:func:`simulate` runs :class:`Arrival` s through a fresh
:class:`~simulator.engine.llm.LlmEngine`, stepping it back to back and
jumping the clock to the next arrival when it is idle, and returns each
request's :class:`RequestRecord` (time to first token, end to end, time per
output token) with the engine's busy time; the tests of the engine and of its
fit to a GPU (:mod:`simulator.engine.device_fit`) time requests with it.

Main decision: **requests are added at the step boundary at or after their
arrival**, as a server's scheduler admits them, so a request that arrives
mid-step waits for that step to end, as on a real server.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from simulator.engine.llm import LlmEngine
from simulator.engine.params import LlmParams

__all__ = ["Arrival", "RequestRecord", "SimulationResult", "simulate"]


@dataclass(frozen=True, slots=True)
class Arrival:
    """A request arriving at ``at_s`` with exact prompt and output lengths."""

    at_s: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What one request saw in :func:`simulate`."""

    arrival_s: float
    first_token_s: float
    finished_s: float
    prompt_tokens: int
    output_tokens: int

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float:
        return self.finished_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Mean time per output token after the first (0 for one-token outputs)."""
        if self.output_tokens <= 1:
            return 0.0
        return (self.finished_s - self.first_token_s) / (self.output_tokens - 1)


@dataclass(frozen=True, slots=True)
class SimulationResult:
    records: tuple[RequestRecord, ...]
    end_s: float
    busy_s: float
    max_waiting: int

    @property
    def output_tokens_per_s(self) -> float:
        start = min(r.arrival_s for r in self.records)
        return sum(r.output_tokens for r in self.records) / (self.end_s - start)


def simulate(
    arrivals: Iterable[Arrival], params: LlmParams | None = None, *, max_steps: int = 10_000_000
) -> SimulationResult:
    """Run ``arrivals`` through a fresh engine on a simulated clock until all finish."""
    engine = LlmEngine(params)
    pending = sorted(arrivals, key=lambda a: a.at_s)
    if not pending:
        raise ValueError("simulate needs at least one arrival")
    queue = [(a.at_s, i, a) for i, a in enumerate(pending)]
    heapq.heapify(queue)
    info: dict[int, Arrival] = {}
    first_at: dict[int, float] = {}
    records: list[RequestRecord] = []
    now = queue[0][0]
    max_waiting = 0
    for _ in range(max_steps):
        while queue and queue[0][0] <= now:
            _, rid, arrival = heapq.heappop(queue)
            info[rid] = arrival
            engine.add(
                rid,
                prompt_tokens=arrival.prompt_tokens,
                output_tokens=arrival.output_tokens,
                now=arrival.at_s,
            )
        max_waiting = max(max_waiting, engine.num_waiting)
        plan = engine.begin_step(now)
        if plan is None:
            if not queue:
                break
            now = queue[0][0]
            continue
        outcome = engine.end_step()
        for rid in outcome.first:
            first_at[rid] = outcome.end_s
        for rid in outcome.finished:
            a = info[rid]
            records.append(
                RequestRecord(
                    arrival_s=a.at_s,
                    first_token_s=first_at[rid],
                    finished_s=outcome.end_s,
                    prompt_tokens=a.prompt_tokens,
                    output_tokens=a.output_tokens,
                )
            )
        now = outcome.end_s
    else:
        raise RuntimeError(f"simulation did not finish within {max_steps} steps")
    return SimulationResult(
        records=tuple(records), end_s=now, busy_s=engine.busy_time_s(now), max_waiting=max_waiting
    )
