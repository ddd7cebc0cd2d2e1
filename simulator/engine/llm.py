"""A vLLM-like continuous-batching engine as a pure model: time is passed in.

The engine runs in *steps*, as vLLM's does. Each step is planned with
:meth:`LlmEngine.begin_step` (which returns when it ends) and applied with
:meth:`LlmEngine.end_step` (which returns the tokens it produced). Between the
two the caller waits, in real time (the sandbox's fake vLLM) or not at all (a
simulated clock: :func:`simulator.engine.arrivals.simulate`, or a world's
replicas, stepped through :class:`simulator.engine.jump.StepEngine`).

Main decision: the scheduler follows vLLM V1's unified step. Every step
decodes one token for each running sequence whose prompt is done, and spends
the rest of a token budget (``max_num_batched_tokens``) on prefill: first on
sequences already admitted whose prompt is only partly processed (chunked
prefill), then on admitting waiting requests in arrival order, while fewer
than ``max_num_seqs`` run and the KV cache has room. What is not admitted
waits and shows as *waiting*. A sequence whose prefill completes in a step
emits its first token at the end of that step. If the KV cache cannot hold the
next token of every decoding sequence, the most recently admitted ones are
preempted (vLLM's recompute preemption): their KV is freed and they go back to
the head of the queue, to prefill prompt and generated tokens again.

Step times come from :class:`~simulator.engine.params.LlmParams` (linear in
the sequences decoding and the tokens prefilled; defaults for Llama-3.1-8B on
one H100, with their sources). Memory is the engine's KV cache
(:class:`~simulator.engine.kv_cache.KvCache`, ``engine.kv``): the slots each
sequence holds, and vLLM's automatic prefix caching in the rest (a request
may carry its prompt as block hashes, ``prefix``, and its leading cached
blocks count as prefilled), with vLLM's KV-cache events when a recorder is
attached. GPU busy time is the sum of step durations: as on a real GPU,
utilization reads near 100% whenever anything runs, however small the batch.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from simulator.engine.kv_cache import KvCache
from simulator.engine.params import LlmParams

__all__ = ["LlmEngine", "StepOutcome", "StepPlan"]


class _State(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class _Seq:
    """One request inside the engine (mutable, private)."""

    __slots__ = (
        "aborted",
        "arrival_s",
        "cached",
        "first_token_s",
        "generated",
        "kv",
        "output_tokens",
        "prefill_target",
        "prefilled",
        "prefix",
        "prompt_tokens",
        "request_id",
        "state",
    )

    def __init__(
        self,
        request_id: int,
        *,
        prompt_tokens: int,
        output_tokens: int,
        arrival_s: float,
        prefix: tuple[Hashable, ...] = (),
    ) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.arrival_s = arrival_s
        self.generated = 0
        # Tokens whose KV must be computed before the next token can be sampled:
        # the prompt, plus what was generated before a preemption.
        self.prefill_target = prompt_tokens
        self.prefilled = 0
        self.first_token_s: float | None = None
        self.state = _State.WAITING
        self.aborted = False
        self.kv = 0  # KV-cache slots this sequence holds
        self.prefix = prefix
        self.cached = 0  # prompt tokens served from the prefix cache at admission


@dataclass(frozen=True, slots=True)
class StepPlan:
    """A step that has started: what it does and when it ends."""

    start_s: float
    end_s: float
    decoding: int
    prefill_tokens: int

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What a finished step produced.

    ``emitted`` lists every request that got one new token in this step (in a
    step each running sequence gets at most one); ``first`` those of them for
    which it was the first token; ``finished`` those that are now complete.
    """

    end_s: float
    emitted: tuple[int, ...]
    first: tuple[int, ...]
    finished: tuple[int, ...]


class LlmEngine:
    """The continuous-batching model. Not thread-safe; every method takes ``now``."""

    def __init__(self, params: LlmParams | None = None) -> None:
        self.params = params or LlmParams()
        self._seqs: dict[int, _Seq] = {}
        self._waiting: deque[_Seq] = deque()
        self._running: list[_Seq] = []  # in admission order
        self._plan: StepPlan | None = None
        # Per planned step: sequences that decode, and those whose prefill completes.
        self._step_decoders: list[_Seq] = []
        self._step_first: list[_Seq] = []
        self._busy_done_s = 0.0
        self.preemptions = 0
        # The KV cache: slots held, the prefix cache, its counts and events.
        self.kv = KvCache(self.params)

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
        """Queue a request; it is admitted at the start of a later step.

        ``prefix``: the prompt's block hashes, for the prefix cache (empty: no caching).
        """
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
        seq = _Seq(
            request_id,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            arrival_s=now,
            prefix=tuple(prefix),
        )
        self._seqs[request_id] = seq
        self._waiting.append(seq)
        self.kv.query(prompt_tokens)

    def abort(self, request_id: int) -> None:
        """Drop a request (client gone). Unknown or finished ids are ignored."""
        seq = self._seqs.get(request_id)
        if seq is None or seq.state is _State.FINISHED:
            return
        if self._plan is not None and (seq in self._step_decoders or seq in self._step_first):
            # Part of the step in flight: removed when the step ends.
            seq.aborted = True
            return
        self._remove(seq)

    def _remove(self, seq: _Seq) -> None:
        if seq.state is _State.WAITING:
            self._waiting.remove(seq)
        elif seq.state is _State.RUNNING:
            self._running.remove(seq)
            self.kv.release(seq.kv)
            seq.kv = 0
        seq.state = _State.FINISHED
        del self._seqs[seq.request_id]

    # --- observation ----------------------------------------------------------------

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def has_work(self) -> bool:
        return bool(self._running or self._waiting)

    @property
    def in_step(self) -> StepPlan | None:
        return self._plan

    def busy_time_s(self, now: float) -> float:
        """GPU-busy seconds up to ``now``: finished steps and the elapsed part of this one."""
        busy = self._busy_done_s
        if self._plan is not None:
            busy += max(0.0, min(now, self._plan.end_s) - self._plan.start_s)
        return busy

    def generated(self, request_id: int) -> int:
        seq = self._seqs.get(request_id)
        return 0 if seq is None else seq.generated

    # --- stepping -------------------------------------------------------------------

    def begin_step(self, now: float) -> StepPlan | None:
        """Plan the step that starts at ``now``; None when there is nothing to do."""
        if self._plan is not None:
            raise RuntimeError("begin_step called while a step is in flight; call end_step first")
        p = self.params
        budget = p.max_num_batched_tokens
        decoders = [s for s in self._running if s.prefilled >= s.prefill_target]
        # Every decoding sequence writes one more KV slot; preempt the newest until they fit.
        while decoders and len(decoders) > self.kv.free:
            victim = self._running[-1]
            self._preempt(victim)
            if victim in decoders:
                decoders.remove(victim)
        budget -= len(decoders)
        for seq in decoders:  # reserve the slot each decoded token will use
            seq.kv += 1
        self.kv.hold(len(decoders))
        first: list[_Seq] = []
        prefill_tokens = 0
        # Continue partial prefills, in admission order.
        for seq in self._running:
            if budget <= 0:
                break
            if seq.prefilled < seq.prefill_target:
                chunk = self.kv.prefill(seq, budget)
                if chunk == 0:
                    break
                budget -= chunk
                prefill_tokens += chunk
                if seq.prefilled >= seq.prefill_target:
                    first.append(seq)
        # Admit waiting requests, first come first served.
        while self._waiting and budget > 0 and len(self._running) < p.max_num_seqs:
            seq = self._waiting[0]
            chunk = self.kv.prefill(seq, budget)
            if chunk == 0:
                break  # KV cache full: wait for sequences to finish
            self._waiting.popleft()
            seq.state = _State.RUNNING
            self._running.append(seq)
            budget -= chunk
            prefill_tokens += chunk
            if seq.prefilled >= seq.prefill_target:
                first.append(seq)
        if not decoders and prefill_tokens == 0:
            return None
        duration = p.step_time_s(decoding=len(decoders), prefill_tokens=prefill_tokens)
        self._plan = StepPlan(
            start_s=now, end_s=now + duration, decoding=len(decoders), prefill_tokens=prefill_tokens
        )
        self._step_decoders = decoders
        self._step_first = first
        return self._plan

    def _preempt(self, seq: _Seq) -> None:
        self._running.remove(seq)
        self.kv.release(seq.kv)
        seq.kv = 0
        seq.prefill_target = seq.prompt_tokens + seq.generated
        seq.prefilled = 0
        seq.state = _State.WAITING
        self._waiting.appendleft(seq)
        self.preemptions += 1

    def end_step(self) -> StepOutcome:
        """Apply the step in flight: hand out its tokens, retire finished sequences."""
        plan = self._plan
        if plan is None:
            raise RuntimeError("end_step called with no step in flight")
        emitted: list[int] = []
        first: list[int] = []
        finished: list[int] = []
        for seq in self._step_decoders:
            seq.generated += 1
        for seq in self._step_first:
            # The token sampled at the end of the prefill takes a slot too.
            seq.generated += 1
            seq.kv += 1
            self.kv.hold(1)
            if seq.first_token_s is None:
                seq.first_token_s = plan.end_s
                first.append(seq.request_id)
        for seq in (*self._step_decoders, *self._step_first):
            if seq.aborted:
                self._remove(seq)
                continue
            emitted.append(seq.request_id)
            if seq.generated >= seq.output_tokens:
                finished.append(seq.request_id)
                self._remove(seq)
        self._busy_done_s += plan.duration_s
        self._plan = None
        self._step_decoders = []
        self._step_first = []
        return StepOutcome(
            end_s=plan.end_s, emitted=tuple(emitted), first=tuple(first), finished=tuple(finished)
        )
