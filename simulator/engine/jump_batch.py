"""The batch a jumping engine schedules: who waits, who prefills, who decodes, counted lazily.

:class:`JumpBatch` is :class:`~simulator.engine.llm.LlmEngine`'s scheduler
(the same unified step, chunked prefill, admission order, prefix cache,
recompute preemption) kept so that a run of identical steps costs nothing
per step: :class:`~simulator.engine.jump.JumpEngine` decides when steps end
and tells the batch how many have; the batch says who runs in them, how many
pure-decode steps can pass before the batch changes, and who finished.

Main decision: **sequences that decode keep their counts lazily.** The batch
counts the steps done and begun; each decoding sequence stores the step
count at which its count of generated tokens (and of KV slots) would have
been zero, so its count is the batch's minus that, and ``k`` steps cost
O(1) whatever the batch. The next sequence to finish is the top of a heap
keyed by the step it finishes in; a sequence that stops decoding (finished,
preempted, aborted) has its counts made plain and its heap entry made stale
by an epoch, rather than searched for.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Sequence

from simulator.engine.kv_cache import KvCache
from simulator.engine.params import LlmParams

__all__ = ["JumpBatch", "Seq"]

_WAITING = 0
_PREFILLING = 1  # running, prompt (or recompute) not fully prefilled
_DECODING = 2  # running, one token a step
_FINISHED = 3


class Seq:
    """One request inside the batch (mutable; only the batch and the KV cache change it)."""

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


class JumpBatch:
    """The waiting queue, the running sequences, and the decoders' lazy counts."""

    def __init__(self, params: LlmParams, kv: KvCache) -> None:
        self._params = params
        self._kv = kv
        self._seqs: dict[int, Seq] = {}
        self._waiting: deque[Seq] = deque()
        self._running: dict[Seq, None] = {}  # in admission order
        self._prefilling: dict[Seq, None] = {}  # the running not yet decoding, in order
        self._decoders = 0
        self._finishes: list[tuple[int, int, int, Seq]] = []  # (step, id, epoch, seq)
        self._steps_done = 0
        self._steps_begun = 0
        self.preemptions = 0

    # --- requests -------------------------------------------------------------------

    def add(
        self, request_id: int, *, prompt_tokens: int, output_tokens: int, prefix: Sequence[Hashable]
    ) -> None:
        """Queue a request, as ``LlmEngine.add``."""
        if request_id in self._seqs:
            raise ValueError(f"request id {request_id} is already in the engine")
        if prompt_tokens < 1 or output_tokens < 1:
            raise ValueError(
                f"prompt_tokens and output_tokens must be >= 1; got {prompt_tokens}, "
                f"{output_tokens}"
            )
        if prompt_tokens + output_tokens > self._params.kv_cache_tokens:
            raise ValueError(
                f"request needs {prompt_tokens + output_tokens} KV tokens but the cache holds "
                f"{self._params.kv_cache_tokens}"
            )
        seq = Seq(request_id, prompt_tokens, output_tokens, tuple(prefix))
        self._seqs[request_id] = seq
        self._waiting.append(seq)
        self._kv.query(prompt_tokens)

    def drop(self, request_id: int) -> Seq | None:
        """Take a request out at once, its KV freed; the sequence (None: unknown or finished)."""
        seq = self._seqs.get(request_id)
        if seq is None:
            return None
        if seq.state == _WAITING:
            self._waiting.remove(seq)
        else:
            self._stop_running(seq)
            self._kv.release(seq.kv)
        seq.state = _FINISHED
        del self._seqs[request_id]
        return seq

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def has_work(self) -> bool:
        return bool(self._running or self._waiting)

    # --- a step's batch -------------------------------------------------------------

    def make_room(self) -> int:
        """Preempt the newest running until every decoder's next token fits; the decoders."""
        decoders = self._decoders
        while decoders and decoders > self._kv.free:
            victim = next(reversed(self._running))
            if victim.state == _DECODING:
                decoders -= 1
            self._preempt(victim)
        return decoders

    def decode_only(self, decoders: int) -> bool:
        """Whether the next steps only decode: nothing prefilling, nobody admissible."""
        return bool(
            decoders
            and not self._prefilling
            and (not self._waiting or len(self._running) >= self._params.max_num_seqs)
        )

    def decode_steps(self, decoders: int) -> int:
        """Pure-decode steps before the batch changes: until the first sequence
        finishes, or until the KV cache is full (at least one)."""
        finish = self._next_finish()
        room = self._kv.free // decoders
        return max(1, min(finish - self._steps_done, room))

    def schedule(self, budget: int) -> tuple[list[Seq], int]:
        """Spend ``budget`` tokens of prefill: partial prefills first, then admissions in
        arrival order; the sequences whose prefill completes, and the tokens prefilled."""
        first: list[Seq] = []
        prefill_tokens = 0
        for seq in list(self._prefilling):
            if budget <= 0:
                break
            chunk = self._kv.prefill(seq, budget)
            if chunk == 0:
                break
            budget -= chunk
            prefill_tokens += chunk
            if seq.prefilled >= seq.prefill_target:
                first.append(seq)
        while self._waiting and budget > 0 and len(self._running) < self._params.max_num_seqs:
            seq = self._waiting[0]
            chunk = self._kv.prefill(seq, budget)
            if chunk == 0:
                break  # KV cache full: wait for sequences to finish
            self._waiting.popleft()
            seq.state = _PREFILLING
            self._running[seq] = None
            self._prefilling[seq] = None
            budget -= chunk
            prefill_tokens += chunk
            if seq.prefilled >= seq.prefill_target:
                first.append(seq)
        return first, prefill_tokens

    # --- steps passing --------------------------------------------------------------

    def begin(self) -> None:
        """A step begins."""
        self._steps_begun += 1

    def advance(self, steps: int, decoders: int) -> None:
        """``steps`` steps are done and as many begun, ``decoders`` decoding in each."""
        self._steps_done += steps
        self._steps_begun += steps
        self._kv.hold(decoders * steps)

    def close_step(self, first: list[Seq], end_s: float) -> tuple[list[int], list[int]]:
        """The step in flight is done, ``first`` prefilled in it: a token each for them
        (the one sampled at the end of the prefill takes a slot too); the requests
        with their first token, and those finished."""
        self._steps_done += 1
        self._kv.hold(len(first))
        firsts: list[int] = []
        finished: list[int] = []
        for seq in first:
            seq.generated += 1
            seq.kv += 1
            if seq.first_token_s is None:
                seq.first_token_s = end_s
                firsts.append(seq.request_id)
            del self._prefilling[seq]
            if seq.generated >= seq.output_tokens:
                finished.append(seq.request_id)
                self._finish(seq)
                continue
            seq.state = _DECODING
            seq.origin = self._steps_done - seq.generated
            seq.kv_origin = self._steps_begun - seq.kv
            self._decoders += 1
            heapq.heappush(
                self._finishes, (seq.origin + seq.output_tokens, seq.request_id, seq.epoch, seq)
            )
        heap = self._finishes
        while heap and heap[0][0] <= self._steps_done:
            _, _, epoch, seq = heapq.heappop(heap)
            if seq.state == _DECODING and seq.epoch == epoch:
                finished.append(seq.request_id)
                self._finish(seq)
        return firsts, finished

    # --- the parts ``LlmEngine`` has too ------------------------------------------------

    def _next_finish(self) -> int:
        heap = self._finishes
        while True:
            step, _, epoch, seq = heap[0]
            if seq.state == _DECODING and seq.epoch == epoch:
                return step
            heapq.heappop(heap)

    def _finish(self, seq: Seq) -> None:
        self._stop_running(seq)
        self._kv.release(seq.kv)
        seq.kv = 0
        seq.state = _FINISHED
        del self._seqs[seq.request_id]

    def _stop_running(self, seq: Seq) -> None:
        """Take ``seq`` out of the batch, its lazy counts made plain."""
        del self._running[seq]
        if seq.state == _DECODING:
            seq.generated = self._steps_done - seq.origin
            seq.kv = self._steps_begun - seq.kv_origin
            seq.epoch += 1
            self._decoders -= 1
        else:
            self._prefilling.pop(seq, None)

    def _preempt(self, seq: Seq) -> None:
        self._stop_running(seq)
        self._kv.release(seq.kv)
        seq.kv = 0
        seq.prefill_target = seq.prompt_tokens + seq.generated
        seq.prefilled = 0
        seq.state = _WAITING
        self._waiting.appendleft(seq)
        self.preemptions += 1
