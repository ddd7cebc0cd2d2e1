"""The continuous-batching engine, jumping from one batch change to the next.

:class:`~simulator.engine.llm.LlmEngine` walks every step: a replica decoding
200 sequences at 16 ms a step costs the simulator 60 steps a second, each
touching every sequence. Yet between two changes of the batch (a request
admitted, a prefill chunk, a sequence finishing, a preemption) every step is
the same: the same sequences decode one token each, and each step takes the
same time. :class:`JumpEngine` schedules exactly as ``LlmEngine`` does (the
same unified step, chunked prefill, admission order, prefix cache,
recompute preemption; the step planning below mirrors its ``begin_step``
line for line) but plans such a run of identical steps as one *jump*: it
knows in closed form how many steps pass before the first sequence
finishes or the KV cache fills, and the caller hears of it once, at its end.

Main decision: **sequences that decode keep their counts lazily.** Each
decoding sequence stores the engine's step count at which its count of
generated tokens (and of KV slots) would have been zero; its count is the
engine's step count minus that, so a jump of k steps costs O(1) whatever
the batch, and the next sequence to finish is the top of a heap keyed by
the step it finishes in. What the caller observes between two changes is
available at once: :meth:`JumpEngine.settle` applies the steps of a jump
that have ended by ``now`` (the tokens they emitted, the KV they reserved),
so a per-second signal is the reference's. A request added during a jump
cuts it (:meth:`JumpEngine.cut`) at the first step boundary after ``now``,
where the step engine would admit it.

Step ``i`` of a jump that starts at ``t0`` ends at ``t0 + i x dt``, where
the step engine adds ``dt`` once per step: the two differ in the last bits
of a float, which moves no event unless two fall within a nanosecond of
each other. :mod:`tests.unit.simulator.test_engine_differential` runs both
engines over a set of traces and compares the scorecards.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from simulator.engine.llm import KvEventRecorder, LlmEngine, LlmParams
from simulator.engine.prefix_cache import PrefixCache

__all__ = ["JumpEngine", "StepEngine", "Stepped"]

_WAITING = 0
_PREFILLING = 1  # running, prompt (or recompute) not fully prefilled
_DECODING = 2  # running, one token a step
_FINISHED = 3


@dataclass(frozen=True, slots=True)
class Stepped:
    """What a finished step (or jump) produced: first tokens, finished requests, tokens."""

    end_s: float
    first: tuple[int, ...]
    finished: tuple[int, ...]
    tokens: int  # tokens emitted by every step it covers


class _Seq:
    __slots__ = (
        "cached",
        "epoch",
        "first_token_s",
        "generated",
        "kv",
        "kv_origin",
        "origin",
        "output_tokens",
        "prefill_target",
        "prefilled",
        "prefix",
        "prompt_tokens",
        "request_id",
        "state",
    )

    def __init__(
        self, request_id: int, prompt_tokens: int, output_tokens: int, prefix: tuple[Hashable, ...]
    ) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.prefix = prefix
        # Eager while waiting or prefilling; while decoding, generated is
        # steps_done - origin and kv is steps_begun - kv_origin.
        self.generated = 0
        self.kv = 0
        self.origin = 0
        self.kv_origin = 0
        self.prefill_target = prompt_tokens
        self.prefilled = 0
        self.cached = 0
        self.first_token_s: float | None = None
        self.state = _WAITING
        self.epoch = 0  # bumped when it stops decoding: its heap entry is stale


@dataclass(slots=True)
class _Plan:
    """Steps in flight: ``steps`` of ``dt`` from ``start``, the first ``settled`` applied."""

    start: float
    dt: float
    steps: int
    decoders: int
    first: list[_Seq]
    settled: int = 0

    def boundary(self, index: int) -> float:
        return self.start + index * self.dt


class JumpEngine:
    """``LlmEngine``'s schedule, stepping only where the batch changes (module docstring)."""

    def __init__(self, params: LlmParams | None = None) -> None:
        self.params = params or LlmParams()
        self._seqs: dict[int, _Seq] = {}
        self._waiting: deque[_Seq] = deque()
        self._running: dict[_Seq, None] = {}  # in admission order
        self._prefilling: dict[_Seq, None] = {}  # the running not yet decoding, in order
        self._decoders = 0
        self._finishes: list[tuple[int, int, int, _Seq]] = []  # (step, id, epoch, seq)
        self._kv_used = 0
        self._steps_done = 0
        self._steps_begun = 0
        self._plan: _Plan | None = None
        self.plan_no = 0  # changes whenever the end of the steps in flight does
        self._busy_done_s = 0.0
        self.preemptions = 0
        self._cache = PrefixCache(self.params.prefix_block_tokens)
        self.cached_tokens = 0
        self.queried_tokens = 0

    @property
    def kv_events(self) -> KvEventRecorder | None:
        """The recorder of the prefix cache's changes (None: not asked for)."""
        return self._cache.events

    @kv_events.setter
    def kv_events(self, recorder: KvEventRecorder | None) -> None:
        self._cache.events = recorder

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
        if request_id in self._seqs:
            raise ValueError(f"request id {request_id} is already in the engine")
        if prompt_tokens < 1 or output_tokens < 1:
            raise ValueError(
                f"prompt_tokens and output_tokens must be >= 1; got {prompt_tokens}, "
                f"{output_tokens}"
            )
        if prompt_tokens + output_tokens > self.params.kv_cache_tokens:
            raise ValueError(
                f"request needs {prompt_tokens + output_tokens} KV tokens but the cache holds "
                f"{self.params.kv_cache_tokens}"
            )
        seq = _Seq(request_id, prompt_tokens, output_tokens, tuple(prefix))
        self._seqs[request_id] = seq
        self._waiting.append(seq)
        self.queried_tokens += prompt_tokens

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
        if len(self._running) >= self.params.max_num_seqs:
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
        seq = self._seqs.get(request_id)
        if seq is None:
            return
        if self._plan is not None and seq in self._plan.first:
            self._plan.first.remove(seq)
        if seq.state == _WAITING:
            self._waiting.remove(seq)
        else:
            self._stop_running(seq)
            self._kv_used -= seq.kv
        seq.state = _FINISHED
        del self._seqs[request_id]

    # --- observation ----------------------------------------------------------------

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def kv_tokens_used(self) -> int:
        return self._kv_used

    @property
    def kv_usage(self) -> float:
        return self._kv_used / self.params.kv_cache_tokens

    @property
    def has_work(self) -> bool:
        return bool(self._running or self._waiting)

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
        decoders = self._decoders
        while decoders and self._kv_used + decoders > p.kv_cache_tokens:
            victim = next(reversed(self._running))
            if victim.state == _DECODING:
                decoders -= 1
            self._preempt(victim)
        if (
            decoders
            and not self._prefilling
            and (not self._waiting or len(self._running) >= p.max_num_seqs)
        ):
            return self._jump(now, decoders)
        budget = p.max_num_batched_tokens - decoders
        self._kv_used += decoders  # the slot each decoded token will use
        first: list[_Seq] = []
        prefill_tokens = 0
        for seq in list(self._prefilling):
            if budget <= 0:
                break
            chunk = self._schedule_prefill(seq, budget)
            if chunk == 0:
                break
            budget -= chunk
            prefill_tokens += chunk
            if seq.prefilled >= seq.prefill_target:
                first.append(seq)
        while self._waiting and budget > 0 and len(self._running) < p.max_num_seqs:
            seq = self._waiting[0]
            chunk = self._schedule_prefill(seq, budget)
            if chunk == 0:
                break
            self._waiting.popleft()
            seq.state = _PREFILLING
            self._running[seq] = None
            self._prefilling[seq] = None
            budget -= chunk
            prefill_tokens += chunk
            if seq.prefilled >= seq.prefill_target:
                first.append(seq)
        if not decoders and prefill_tokens == 0:
            return None
        self._steps_begun += 1
        dt = p.step_time_s(decoding=decoders, prefill_tokens=prefill_tokens)
        return self._start(_Plan(start=now, dt=dt, steps=1, decoders=decoders, first=first))

    def _jump(self, now: float, decoders: int) -> float:
        """Pure decode: steps until the first finish, or until the KV cache is full."""
        finish = self._next_finish()
        room = (self.params.kv_cache_tokens - self._kv_used) // decoders
        steps = max(1, min(finish - self._steps_done, room))
        self._kv_used += decoders
        self._steps_begun += 1
        dt = self.params.step_time_s(decoding=decoders, prefill_tokens=0)
        return self._start(_Plan(start=now, dt=dt, steps=steps, decoders=decoders, first=[]))

    def _start(self, plan: _Plan) -> float:
        self._plan = plan
        self.plan_no += 1
        return plan.boundary(plan.steps)

    def _next_finish(self) -> int:
        heap = self._finishes
        while True:
            step, _, epoch, seq = heap[0]
            if seq.state == _DECODING and seq.epoch == epoch:
                return step
            heapq.heappop(heap)

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
        self._steps_done += steps
        self._steps_begun += steps
        self._kv_used += plan.decoders * steps
        plan.settled = index
        return plan.decoders * steps

    def end_step(self) -> Stepped:
        """Apply the step (or jump) in flight: first tokens, finished sequences."""
        plan = self._plan
        if plan is None:
            raise RuntimeError("end_step called with no step in flight")
        end_s = plan.boundary(plan.steps)
        tokens = self._apply(plan, plan.steps - 1) + plan.decoders
        self._busy_done_s += end_s - plan.boundary(plan.settled)
        self._steps_done += 1
        self._plan = None
        first: list[int] = []
        finished: list[int] = []
        for seq in plan.first:
            # The token sampled at the end of the prefill takes a slot too.
            seq.generated += 1
            seq.kv += 1
            self._kv_used += 1
            tokens += 1
            if seq.first_token_s is None:
                seq.first_token_s = end_s
                first.append(seq.request_id)
            del self._prefilling[seq]
            if seq.generated >= seq.output_tokens:
                finished.append(seq.request_id)
                self._finish(seq)
                continue
            seq.state = _DECODING
            seq.origin = self._steps_done - seq.generated
            seq.kv_origin = self._steps_begun - seq.kv
            self._decoders += 1
            entry = (seq.origin + seq.output_tokens, seq.request_id, seq.epoch, seq)
            heapq.heappush(self._finishes, entry)
        heap = self._finishes
        while heap and heap[0][0] <= self._steps_done:
            _, _, epoch, seq = heapq.heappop(heap)
            if seq.state == _DECODING and seq.epoch == epoch:
                finished.append(seq.request_id)
                self._finish(seq)
        return Stepped(end_s=end_s, first=tuple(first), finished=tuple(finished), tokens=tokens)

    # --- the parts ``LlmEngine`` has too ------------------------------------------------

    def _finish(self, seq: _Seq) -> None:
        self._stop_running(seq)
        self._kv_used -= seq.kv
        seq.kv = 0
        seq.state = _FINISHED
        del self._seqs[seq.request_id]

    def _stop_running(self, seq: _Seq) -> None:
        """Take ``seq`` out of the batch, its lazy counts made plain."""
        del self._running[seq]
        if seq.state == _DECODING:
            seq.generated = self._steps_done - seq.origin
            seq.kv = self._steps_begun - seq.kv_origin
            seq.epoch += 1
            self._decoders -= 1
        else:
            self._prefilling.pop(seq, None)

    def _preempt(self, seq: _Seq) -> None:
        self._stop_running(seq)
        self._kv_used -= seq.kv
        seq.kv = 0
        seq.prefill_target = seq.prompt_tokens + seq.generated
        seq.prefilled = 0
        seq.state = _WAITING
        self._waiting.appendleft(seq)
        self.preemptions += 1

    def _schedule_prefill(self, seq: _Seq, budget: int) -> int:
        if seq.prefix and seq.prefilled == 0:
            self._reuse_prefix(seq)
        free = self.params.kv_cache_tokens - self._kv_used
        chunk = min(seq.prefill_target - seq.prefilled, budget, free)
        if chunk <= 0:
            return 0
        seq.prefilled += chunk
        seq.kv += chunk
        self._kv_used += chunk
        if seq.prefix and seq.prefilled >= seq.prefill_target:
            self._remember(seq.prefix)
        return chunk

    def _reuse_prefix(self, seq: _Seq) -> None:
        hits = self._cache.touch_leading(seq.prefix)
        free = self.params.kv_cache_tokens - self._kv_used
        cached = min(hits * self.params.prefix_block_tokens, seq.prefill_target - 1, free)
        if cached <= 0:
            return
        seq.prefilled = cached
        seq.kv += cached
        self._kv_used += cached
        seq.cached += cached
        self.cached_tokens += cached
        self._cache.evict(self.params.kv_cache_tokens - self._kv_used)

    def _remember(self, prefix: tuple[Hashable, ...]) -> None:
        self._cache.store(prefix, self.params.kv_cache_tokens - self._kv_used)


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
