"""The continuous-batching engine, jumping from one batch change to the next.

:class:`~simulator.engine.llm.LlmEngine` walks every step: a replica decoding
200 sequences at 16 ms a step costs the simulator 60 steps a second, each
touching every sequence. Yet between two changes of the batch (a request
admitted, a prefill chunk, a sequence finishing, a preemption) every step is
the same: the same sequences decode one token each, and each step takes the
same time. :class:`JumpEngine` schedules exactly as ``LlmEngine`` does (its
batch, :class:`~simulator.engine.jump_batch.JumpBatch`, mirrors the step
engine's scheduler line for line, over the same KV cache,
:class:`~simulator.engine.kv_cache.KvCache`) but plans such a run of
identical steps as one *jump*: the batch knows in closed form how many
steps pass before the first sequence finishes or the KV cache fills, and
the caller hears of it once, at its end.

Main decision: **what the caller observes between two changes is available
at once.** :meth:`JumpEngine.settle` applies the steps of a jump that have
ended by ``now`` (the tokens they emitted, the KV they reserved), so a
per-second signal is the reference's. A request added during a jump cuts
it (:meth:`JumpEngine.cut`) at the first step boundary after ``now``, where
the step engine would admit it.

Step ``i`` of a jump that starts at ``t0`` ends at ``t0 + i x dt``, where
the step engine adds ``dt`` once per step: the two differ in the last bits
of a float, which moves no event unless two fall within a nanosecond of
each other. :mod:`tests.unit.simulator.test_engine_differential` runs both
engines over a set of traces and compares the scorecards.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from simulator.engine.jump_batch import JumpBatch, Seq
from simulator.engine.kv_cache import KvCache
from simulator.engine.llm import LlmEngine
from simulator.engine.params import LlmParams

__all__ = ["JumpEngine", "StepEngine", "Stepped"]


@dataclass(frozen=True, slots=True)
class Stepped:
    """What a finished step (or jump) produced: first tokens, finished requests, tokens."""

    end_s: float
    first: tuple[int, ...]
    finished: tuple[int, ...]
    tokens: int  # tokens emitted by every step it covers


@dataclass(slots=True)
class _Plan:
    """Steps in flight: ``steps`` of ``dt`` from ``start``, the first ``settled`` applied."""

    start: float
    dt: float
    steps: int
    decoders: int
    first: list[Seq]
    settled: int = 0

    def boundary(self, index: int) -> float:
        return self.start + index * self.dt


class JumpEngine:
    """``LlmEngine``'s schedule, stepping only where the batch changes (module docstring)."""

    def __init__(self, params: LlmParams | None = None) -> None:
        self.params = params or LlmParams()
        # The KV cache: slots held, the prefix cache, its counts and events.
        self.kv = KvCache(self.params)
        self._batch = JumpBatch(self.params, self.kv)
        self._plan: _Plan | None = None
        self.plan_no = 0  # changes whenever the end of the steps in flight does
        self._busy_done_s = 0.0

    # --- requests -------------------------------------------------------------------

    def add(
        self,
        request_id: int,
        *,
        prompt_tokens: int,
        output_tokens: int,
        now: float,
        prefix: Sequence[Hashable] = (),
    ) -> None:
        """Queue a request, as ``LlmEngine.add``; a jump in flight is left to :meth:`cut`."""
        self._batch.add(
            request_id, prompt_tokens=prompt_tokens, output_tokens=output_tokens, prefix=prefix
        )

    def cut(self, now: float, *, inclusive: bool = False) -> float | None:
        """End the jump in flight where the step engine would next admit a request.

        That is the first step boundary after ``now`` (at or after it with
        ``inclusive``: the caller handles ``now`` before steps ending then).
        Returns the new end, or None when nothing changed (no jump, or one
        whose batch is full and so admits nobody before it ends).
        """
        plan = self._plan
        if plan is None or plan.steps - plan.settled <= 1:
            return None
        if self._batch.num_running >= self.params.max_num_seqs:
            return None
        index = max(plan.settled + 1, math.floor((now - plan.start) / plan.dt))
        lowest = plan.settled + 1
        while index > lowest and not self._after(plan.boundary(index - 1), now, inclusive):
            index -= 1
        while not self._after(plan.boundary(index), now, inclusive):
            index += 1
        if index >= plan.steps:
            return None
        plan.steps = index
        self.plan_no += 1
        return plan.boundary(index)

    @staticmethod
    def _after(boundary: float, now: float, inclusive: bool) -> bool:
        return boundary >= now if inclusive else boundary > now

    def abort(self, request_id: int) -> None:
        """Drop a request at once (its node is gone); unknown or finished ids are ignored."""
        seq = self._batch.drop(request_id)
        if seq is not None and self._plan is not None and seq in self._plan.first:
            self._plan.first.remove(seq)

    # --- observation ----------------------------------------------------------------

    @property
    def num_running(self) -> int:
        return self._batch.num_running

    @property
    def num_waiting(self) -> int:
        return self._batch.num_waiting

    @property
    def has_work(self) -> bool:
        return self._batch.has_work

    @property
    def in_step(self) -> bool:
        return self._plan is not None

    def busy_time_s(self, now: float) -> float:
        """GPU-busy seconds up to ``now`` (call :meth:`settle` first for the steps in it)."""
        plan = self._plan
        if plan is None:
            return self._busy_done_s
        start = plan.boundary(plan.settled)
        end = plan.boundary(plan.settled + 1)
        return self._busy_done_s + max(0.0, min(now, end) - start)

    # --- stepping -------------------------------------------------------------------

    def begin_step(self, now: float) -> float | None:
        """Plan the next step, or jump, from ``now``; its end, or None when idle."""
        if self._plan is not None:
            raise RuntimeError("begin_step called while steps are in flight; call end_step first")
        p = self.params
        batch = self._batch
        decoders = batch.make_room()
        if batch.decode_only(decoders):
            return self._jump(now, decoders)
        self.kv.hold(decoders)  # the slot each decoded token will use
        first, prefill_tokens = batch.schedule(p.max_num_batched_tokens - decoders)
        if not decoders and prefill_tokens == 0:
            return None
        batch.begin()
        dt = p.step_time_s(decoding=decoders, prefill_tokens=prefill_tokens)
        return self._start(_Plan(start=now, dt=dt, steps=1, decoders=decoders, first=first))

    def _jump(self, now: float, decoders: int) -> float:
        """Pure decode: steps until the first finish, or until the KV cache is full."""
        steps = self._batch.decode_steps(decoders)
        self.kv.hold(decoders)
        self._batch.begin()
        dt = self.params.step_time_s(decoding=decoders, prefill_tokens=0)
        return self._start(_Plan(start=now, dt=dt, steps=steps, decoders=decoders, first=[]))

    def _start(self, plan: _Plan) -> float:
        self._plan = plan
        self.plan_no += 1
        return plan.boundary(plan.steps)

    def settle(self, now: float) -> int:
        """Apply the steps of the jump in flight that ended by ``now``; the tokens they emitted.

        The last step of a jump is applied by :meth:`end_step`, never here.
        """
        plan = self._plan
        if plan is None or plan.steps - plan.settled <= 1:
            return 0
        index = min(plan.steps - 1, max(plan.settled, math.floor((now - plan.start) / plan.dt)))
        while index > plan.settled and plan.boundary(index) > now:
            index -= 1
        while index + 1 < plan.steps and plan.boundary(index + 1) <= now:
            index += 1
        return self._apply(plan, index)

    def _apply(self, plan: _Plan, index: int) -> int:
        """Steps ``plan.settled + 1 .. index`` are done; the next one is begun."""
        steps = index - plan.settled
        if steps <= 0:
            return 0
        self._busy_done_s += plan.boundary(index) - plan.boundary(plan.settled)
        self._batch.advance(steps, plan.decoders)
        plan.settled = index
        return plan.decoders * steps

    def end_step(self) -> Stepped:
        """Apply the step (or jump) in flight: first tokens, finished sequences."""
        plan = self._plan
        if plan is None:
            raise RuntimeError("end_step called with no step in flight")
        end_s = plan.boundary(plan.steps)
        tokens = self._apply(plan, plan.steps - 1) + plan.decoders + len(plan.first)
        self._busy_done_s += end_s - plan.boundary(plan.settled)
        self._plan = None
        first, finished = self._batch.close_step(plan.first, end_s)
        return Stepped(end_s=end_s, first=tuple(first), finished=tuple(finished), tokens=tokens)


class StepEngine(LlmEngine):
    """The step engine (the reference) behind :class:`JumpEngine`'s interface.

    Every plan is one step: nothing to cut, nothing to settle.
    """

    def __init__(self, params: LlmParams | None = None) -> None:
        super().__init__(params)
        self.plan_no = 0

    def cut(self, now: float, *, inclusive: bool = False) -> float | None:
        return None

    def settle(self, now: float) -> int:
        return 0

    def begin_step(self, now: float) -> float | None:  # type: ignore[override]
        plan = super().begin_step(now)
        if plan is None:
            return None
        self.plan_no += 1
        return plan.end_s

    def end_step(self) -> Stepped:  # type: ignore[override]
        outcome = super().end_step()
        return Stepped(
            end_s=outcome.end_s,
            first=outcome.first,
            finished=outcome.finished,
            tokens=len(outcome.emitted),
        )
