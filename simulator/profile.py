"""What one replica can carry: a profile of the engine model, as Dynamo's profiler takes one.

The planner baseline (Dynamo's SLA planner) sizes prefill and decode
separately, each as predicted load over a per-GPU throughput profiled before
deployment (Dynamo's ``profile_sla``):

- **prefill**: the tokens per second a replica prefills a prompt of the
  given length with, alone (Dynamo profiles one request at each input
  length and divides the length by its TTFT); here, on the engine model,
  ``isl / ttft`` with ``ttft = ceil(isl / max_num_batched_tokens) x
  step_base_s + isl / prefill_tokens_per_s``;
- **decode**: the output tokens per second a replica produces at the
  largest batch whose inter-token latency stays within the objective
  (Dynamo sweeps the concurrency at a context of ``isl + osl / 2`` and
  keeps the highest throughput within the ITL target); here the batch is
  capped by ``max_num_seqs``, by the step time ``step_base_s +
  step_per_seq_s x batch <= itl`` and by the KV cache holding ``batch x
  (isl + osl / 2)`` tokens.

Main decision: the profile is read off the engine's step-time formula
instead of running it, because the simulated replicas run that very formula:
a measurement would find the same numbers, less a sampling error.
"""

from __future__ import annotations

import math

from simulator.engine import LlmParams

__all__ = ["DEFAULT_ITL_S", "decode_tokens_per_s", "prefill_tokens_per_s"]

#: Dynamo's planner default inter-token objective (``itl``: 50 ms).
DEFAULT_ITL_S = 0.05


def prefill_tokens_per_s(params: LlmParams, isl: float) -> float:
    """Prompt tokens per second one replica prefills prompts of ``isl`` tokens at, alone."""
    tokens = max(1.0, isl)
    steps = max(1, math.ceil(tokens / params.max_num_batched_tokens))
    return tokens / (steps * params.step_base_s + tokens / params.prefill_tokens_per_s)


def decode_tokens_per_s(params: LlmParams, isl: float, osl: float, itl_s: float) -> float:
    """Output tokens per second one replica decodes at the largest batch within ``itl_s``.

    A batch of one when even that misses the objective (the profile then
    reports what one sequence gets, as a sweep that starts at one would).
    """
    if not itl_s > 0:
        raise ValueError(f"the inter-token objective must be > 0 s, got {itl_s}")
    slack = itl_s - params.step_base_s
    if params.step_per_seq_s > 0:
        by_latency = math.floor(slack / params.step_per_seq_s + 1e-9)
    else:
        by_latency = params.max_num_seqs if slack >= 0 else 0
    context = max(1.0, isl + osl / 2)
    by_memory = math.floor(params.kv_cache_tokens / context)
    batch = max(1, min(params.max_num_seqs, by_latency, by_memory))
    return batch / (params.step_base_s + params.step_per_seq_s * batch)
