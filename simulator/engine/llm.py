"""A vLLM-like continuous-batching engine as a pure model: time is passed in.

The engine runs in *steps*, as vLLM's does. Each step is planned with
:meth:`LlmEngine.begin_step` (which returns when it ends) and applied with
:meth:`LlmEngine.end_step` (which returns the tokens it produced). Between the
two the caller waits, in real time (the sandbox's fake vLLM) or not at all (a
simulated clock, :func:`simulate`).

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

Step time is linear, which is how such engines behave below compute
saturation::

    step_s = step_base_s + step_per_seq_s * decoding + prefill_tokens / prefill_tokens_per_s

Decode is memory-bound: a step reads all weights once whatever the batch
(``step_base_s``), plus a little per sequence (KV reads, sampling). Prefill is
compute-bound: its cost grows with prompt tokens. Attention cost growing with
context length is not modelled (small at the short contexts of chat traffic).

Prefix caching (vLLM's automatic prefix caching, on by default): a request
may carry its prompt as block hashes (``prefix``, each block
``prefix_block_tokens`` long). When it is first admitted, the longest run of
its leading blocks found in this engine's cache is taken as already
prefilled (at least one prompt token is always computed, as vLLM recomputes
the last one); its blocks enter the cache once its prefill is scheduled.
The cache keeps blocks in least-recently-used order and evicts the oldest
whenever the cached blocks and the running sequences' KV together exceed
the KV cache (a conservative reading: vLLM shares a running sequence's
cached blocks instead of counting them twice). A request without a prefix
never touches the cache, so traces without the field run as before. Given a
:class:`KvEventRecorder` (before its first request), the engine records
each change to its cache as vLLM's KV-cache events do (blocks stored,
blocks evicted, all cleared), for a router that tracks caches exactly.

Default parameters: Llama-3.1-8B, BF16, one H100 80GB SXM, vLLM 0.6-era
scheduler (see :class:`LlmParams` for where each number comes from).
GPU busy time is the sum of step durations: as on a real GPU, utilization
reads near 100% whenever anything runs, however small the batch.
"""

from __future__ import annotations

import enum
import heapq
import math
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "Arrival",
    "KvEventRecorder",
    "LlmEngine",
    "LlmParams",
    "RequestRecord",
    "StepOutcome",
    "StepPlan",
    "simulate",
]

# --- Default parameters and their sources ---------------------------------------------
#
# [L1] Lambda Labs, "vllm-benchmark", results/prompt_10/1xH100-80GB-SXM/
#      Meta-Llama-3-8B-Instruct_tp1_len2048.json (2024-09-07, vLLM 0.6.0,
#      --num-scheduler-steps 10): 10 ShareGPT prompts sent at once (1369 prompt
#      tokens in all). Mean TTFT 62.4 ms; mean inter-token latency 72.4 ms per
#      10-step chunk, i.e. 7.2 ms per decode step at a batch of 10.
# [L2] Lambda Labs, "vllm-benchmark", benchmark_v0.md, table "Llama 3.1 8B:
#      tp=1, rps=inf, num-prompt=5000, max-num-seq=256, max-seq-len=2048"
#      (ShareGPT), vLLM v0.6.0 with 10 scheduler steps on 1xH100: output
#      throughput 8088 tokens/s, median TPOT 25.6 ms.
# [V1] vLLM blog, "vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency
#      Reduction" (2024-09-05): ShareGPT averages 202 input and 179 output
#      tokens; "Llama3 8B can generate 1 token every 13 ms under light load"
#      (before the v0.6.0 CPU-overhead fixes; [L1] is after them).
# [K1] Llama-3.1-8B architecture (config.json): 32 layers, 8 KV heads of 128
#      dims; BF16 KV: 2 (K, V) x 32 x 8 x 128 x 2 bytes = 128 KiB per token.
#
# Fitting: the decode step is 7.2 ms at 10 sequences [L1]. At saturation
# (256 sequences, ShareGPT lengths [V1]) each step decodes 256 tokens and, on
# average, prefills the prompts of the 256/179 = 1.43 requests that replace
# finished ones (289 tokens); [L2]'s 8088 tokens/s means 31.6 ms per such step.
# With prefill at 25,000 tokens/s (below) that leaves 20.0 ms for 256 decodes:
# slope (20.0 - 7.2) / 246 = 0.052 ms per sequence, base 7.2 - 0.52 = 6.68 ms.
# Prefill: [L1]'s first step prefills 1369 tokens in 62 ms with the 6.7 ms
# base, i.e. about 25,000 tokens/s (40% of the H100's 989 dense BF16 TFLOPS at
# 16 GFLOP per token of an 8B model: plausible).
# KV cache: 0.9 x 80 GB (vLLM's default gpu_memory_utilization) minus 16 GB of
# weights and ~4 GB of activations and CUDA graphs leaves ~52 GB, /128 KiB [K1]
# is about 400,000 tokens.
# max_num_seqs 256 and max_num_batched_tokens 8192: vLLM's defaults for the
# OpenAI server on an 80 GB GPU in the V0/V1 releases these figures came from
# (and [L2]'s max-num-seq).
DEFAULT_STEP_BASE_S = 0.00668
DEFAULT_STEP_PER_SEQ_S = 0.000052
DEFAULT_PREFILL_TOKENS_PER_S = 25_000.0
DEFAULT_KV_CACHE_TOKENS = 400_000
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
# Llama-3.1-8B's context (config.json max_position_embeddings), which vLLM
# takes as max_model_len when none is given; a longer prompt gets a 400.
DEFAULT_MAX_MODEL_LEN = 131_072
# Tokens per prefix-block hash: the Mooncake traces' block size (their hash_ids).
DEFAULT_PREFIX_BLOCK_TOKENS = 512


@dataclass(frozen=True, slots=True)
class LlmParams:
    """Performance knobs of the model (defaults: Llama-3.1-8B on one H100, see above)."""

    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    prefill_tokens_per_s: float = DEFAULT_PREFILL_TOKENS_PER_S
    step_base_s: float = DEFAULT_STEP_BASE_S
    step_per_seq_s: float = DEFAULT_STEP_PER_SEQ_S
    kv_cache_tokens: int = DEFAULT_KV_CACHE_TOKENS
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    prefix_block_tokens: int = DEFAULT_PREFIX_BLOCK_TOKENS

    def __post_init__(self) -> None:
        checks: list[tuple[str, float, bool, str]] = [
            ("max_num_seqs", self.max_num_seqs, self.max_num_seqs >= 1, ">= 1"),
            (
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                self.max_num_batched_tokens >= self.max_num_seqs,
                f">= max_num_seqs ({self.max_num_seqs}), so that every running sequence can decode",
            ),
            (
                "prefill_tokens_per_s",
                self.prefill_tokens_per_s,
                self.prefill_tokens_per_s > 0,
                "> 0",
            ),
            ("step_base_s", self.step_base_s, self.step_base_s > 0, "> 0"),
            ("step_per_seq_s", self.step_per_seq_s, self.step_per_seq_s >= 0, ">= 0"),
            ("kv_cache_tokens", self.kv_cache_tokens, self.kv_cache_tokens >= 1, ">= 1"),
            ("max_model_len", self.max_model_len, self.max_model_len >= 1, ">= 1"),
            (
                "prefix_block_tokens",
                self.prefix_block_tokens,
                self.prefix_block_tokens >= 1,
                ">= 1",
            ),
        ]
        for name, value, ok, allowed in checks:
            if not ok or (isinstance(value, float) and not math.isfinite(value)):
                raise ValueError(f"LlmParams.{name} must be {allowed}; got {value!r}")

    def step_time_s(self, *, decoding: int, prefill_tokens: int) -> float:
        """Duration of one step that decodes ``decoding`` sequences and prefills some tokens."""
        return (
            self.step_base_s
            + self.step_per_seq_s * decoding
            + prefill_tokens / self.prefill_tokens_per_s
        )


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


class KvEventRecorder:
    """A cache's changes as vLLM's KV-cache events, in the layout its msgpack decodes to.

    ``[tag, fields...]`` per event: ``["BlockStored", block_hashes,
    parent_block_hash, token_ids, block_size, lora_id, medium]`` (no token
    ids: the model has none), ``["BlockRemoved", block_hashes, medium]``,
    ``["AllBlocksCleared"]``. It starts with a clear, so that a subscriber
    starts from an empty cache.
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._events: list[list[object]] = [["AllBlocksCleared"]]

    def stored(self, blocks: list[Hashable], parent: Hashable | None) -> None:
        self._events.append(["BlockStored", blocks, parent, [], self.block_size, None, None])

    def removed(self, blocks: list[Hashable]) -> None:
        self._events.append(["BlockRemoved", blocks, None])

    def cleared(self) -> None:
        self._events.append(["AllBlocksCleared"])

    def take(self) -> list[list[object]]:
        """The events since the last call."""
        events, self._events = self._events, []
        return events


class LlmEngine:
    """The continuous-batching model. Not thread-safe; every method takes ``now``."""

    def __init__(self, params: LlmParams | None = None) -> None:
        self.params = params or LlmParams()
        self._seqs: dict[int, _Seq] = {}
        self._waiting: deque[_Seq] = deque()
        self._running: list[_Seq] = []  # in admission order
        self._kv_used = 0
        self._plan: StepPlan | None = None
        # Per planned step: sequences that decode, and those whose prefill completes.
        self._step_decoders: list[_Seq] = []
        self._step_first: list[_Seq] = []
        self._busy_done_s = 0.0
        self.preemptions = 0
        # Prefix cache: block hash -> None, least recently used first.
        self._blocks: OrderedDict[Hashable, None] = OrderedDict()
        self.cached_tokens = 0  # prompt tokens served from the cache, all requests
        self.queried_tokens = 0  # prompt tokens of every request added (vLLM's cache queries)
        # Set to record the cache's changes as vLLM's KV events (None: not asked).
        self.kv_events: KvEventRecorder | None = None

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
        self.queried_tokens += prompt_tokens

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
            self._kv_used -= seq.kv
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
    def kv_tokens_used(self) -> int:
        return self._kv_used

    @property
    def kv_usage(self) -> float:
        """Share of the KV cache held, 0..1 (vLLM's ``kv_cache_usage_perc``)."""
        return self._kv_used / self.params.kv_cache_tokens

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
        while decoders and self._kv_used + len(decoders) > p.kv_cache_tokens:
            victim = self._running[-1]
            self._preempt(victim)
            if victim in decoders:
                decoders.remove(victim)
        budget -= len(decoders)
        for seq in decoders:  # reserve the slot each decoded token will use
            seq.kv += 1
        self._kv_used += len(decoders)
        first: list[_Seq] = []
        prefill_tokens = 0
        # Continue partial prefills, in admission order.
        for seq in self._running:
            if budget <= 0:
                break
            if seq.prefilled < seq.prefill_target:
                chunk = self._schedule_prefill(seq, budget)
                if chunk == 0:
                    break
                budget -= chunk
                prefill_tokens += chunk
                if seq.prefilled >= seq.prefill_target:
                    first.append(seq)
        # Admit waiting requests, first come first served.
        while self._waiting and budget > 0 and len(self._running) < p.max_num_seqs:
            seq = self._waiting[0]
            chunk = self._schedule_prefill(seq, budget)
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

    def _schedule_prefill(self, seq: _Seq, budget: int) -> int:
        """Schedule up to ``budget`` prompt tokens of ``seq`` if the KV cache has room."""
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
        """Take the cached leading blocks of ``seq``'s prompt as prefilled."""
        hits = 0
        for block in seq.prefix:
            if block not in self._blocks:
                break
            self._blocks.move_to_end(block)
            hits += 1
        free = self.params.kv_cache_tokens - self._kv_used
        cached = min(hits * self.params.prefix_block_tokens, seq.prefill_target - 1, free)
        if cached <= 0:
            return
        seq.prefilled = cached
        seq.kv += cached
        self._kv_used += cached
        seq.cached += cached
        self.cached_tokens += cached
        self._evict()

    def _remember(self, prefix: tuple[Hashable, ...]) -> None:
        stored: list[Hashable] = []
        for block in prefix:
            if block not in self._blocks:
                stored.append(block)
            self._blocks[block] = None
            self._blocks.move_to_end(block)
        if self.kv_events is not None and stored:
            first = prefix.index(stored[0])
            self.kv_events.stored(stored, prefix[first - 1] if first else None)
        self._evict()

    def _evict(self) -> None:
        room = self.params.kv_cache_tokens - self._kv_used
        removed: list[Hashable] = []
        while self._blocks and len(self._blocks) * self.params.prefix_block_tokens > room:
            removed.append(self._blocks.popitem(last=False)[0])
        if self.kv_events is not None and removed:
            self.kv_events.removed(removed)

    def reset_prefix_cache(self) -> None:
        """Drop every cached block (vLLM's ``/reset_prefix_cache``)."""
        self._blocks.clear()
        if self.kv_events is not None:
            self.kv_events.cleared()

    def _preempt(self, seq: _Seq) -> None:
        self._running.remove(seq)
        self._kv_used -= seq.kv
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
            self._kv_used += 1
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


# --- simulated clock -----------------------------------------------------------------


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
