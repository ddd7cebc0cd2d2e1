"""The performance knobs of the engine model, and where each default comes from.

:class:`LlmParams` describes one model on one GPU for the engine models
(:mod:`simulator.engine.llm`, :mod:`simulator.engine.jump`): the
scheduler's limits (``max_num_seqs``, ``max_num_batched_tokens``), the
step time's three terms, the KV cache's size, the context length and the
prefix-cache block size. The defaults are Llama-3.1-8B in BF16 on one H100
80GB SXM under a vLLM 0.6-era scheduler; the comment below gives each
number's source and the fit that turns benchmark figures into step times.

Main decision: **step time is linear**, which is how such engines behave
below compute saturation::

    step_s = step_base_s + step_per_seq_s * decoding + prefill_tokens / prefill_tokens_per_s

Decode is memory-bound: a step reads all weights once whatever the batch
(``step_base_s``), plus a little per sequence (KV reads, sampling). Prefill
is compute-bound: its cost grows with prompt tokens. Attention cost
growing with context length is not modelled (small at the short contexts
of chat traffic). Other GPUs and MIG slices are this model scaled
(:mod:`simulator.engine.device_fit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["LlmParams"]

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
