"""The engine model on another device: its parameters scaled to a GPU or a MIG slice.

:class:`~simulator.engine.params.LlmParams` describes a model on the
reference GPU (the defaults: Llama-3.1-8B on one H100 80GB). On a device
whose compute, memory bandwidth and memory are given as ratios to the
reference (``groundwork.gpu_catalog`` holds them, with their sources),
:func:`fit_to_device` scales each figure by the resource that bounds it:

- prefill is compute-bound: ``prefill_tokens_per_s`` x compute;
- a decode step reads every weight once, and a little per sequence (its KV
  cache): ``step_base_s`` and ``step_per_seq_s`` / bandwidth;
- the KV cache gets what the weights and the activations leave of the
  memory vLLM may use (``--gpu-memory-utilization`` of it):
  ``kv_cache_tokens`` x (util x memory - weights - activations) / (0.9 x
  reference memory - weights - activations), so the reference keeps its
  figure exactly and an 8B model on a 40 GB slice gets about a third of it;
- ``count`` devices (tensor parallelism) multiply each ratio and the
  memory: an upper bound, as the all-reduce between them is not modelled.

It then refuses to start as vLLM refuses, with vLLM's words: weights larger
than the device (a CUDA out-of-memory error while loading), nothing left
for the KV cache (``No available memory for the cache blocks``), or a
``max_model_len`` longer than the KV cache holds (``The model's max seq
len (N) is larger than the maximum number of tokens that can be stored in
KV cache (M)``), the error that makes one set ``--max-model-len`` per GPU.

Main decision: the activations and CUDA graphs take a fixed 4 GiB on every
device (the figure the reference's 400,000-token KV cache was fitted with,
in :mod:`simulator.engine.params`); they grow with the token budget of a
step, not with the GPU.
"""

from __future__ import annotations

from dataclasses import replace

from simulator.engine.params import LlmParams

__all__ = [
    "ACTIVATIONS_MIB",
    "REFERENCE_UTILIZATION",
    "DoesNotFit",
    "fit_to_device",
    "kv_room_mib",
]

ACTIVATIONS_MIB = 4_096
#: vLLM's default --gpu-memory-utilization, at which the reference KV cache was sized.
REFERENCE_UTILIZATION = 0.9


class DoesNotFit(ValueError):
    """The model cannot start on the device; the message is what vLLM would say."""


def kv_room_mib(*, memory_mib: float, weights_mib: int, utilization: float) -> float:
    """MiB left for the KV cache on a device (negative: not even the weights fit)."""
    return utilization * memory_mib - weights_mib - ACTIVATIONS_MIB


def fit_to_device(
    params: LlmParams,
    *,
    compute_ratio: float,
    bandwidth_ratio: float,
    memory_mib: int,
    reference_memory_mib: int,
    weights_mib: int,
    max_model_len: int,
    gpu_memory_utilization: float = REFERENCE_UTILIZATION,
    count: int = 1,
) -> LlmParams:
    """``params`` (figures on the reference GPU) as they are on the device (module docstring).

    Raises :class:`DoesNotFit` when vLLM would not start there, and
    ``ValueError`` for arguments out of range.
    """
    if not (compute_ratio > 0 and bandwidth_ratio > 0):
        raise ValueError(
            f"compute and bandwidth ratios must be > 0; got {compute_ratio}, {bandwidth_ratio}"
        )
    if count < 1 or memory_mib < 1 or reference_memory_mib < 1 or weights_mib < 0:
        raise ValueError(
            f"need count >= 1, memories >= 1 MiB and weights >= 0 MiB; got count {count}, "
            f"memory {memory_mib}, reference {reference_memory_mib}, weights {weights_mib}"
        )
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1]; got {gpu_memory_utilization}")
    reference_room = kv_room_mib(
        memory_mib=reference_memory_mib, weights_mib=weights_mib, utilization=REFERENCE_UTILIZATION
    )
    if reference_room <= 0:
        raise ValueError(
            f"weights of {weights_mib} MiB leave no KV cache on the reference GPU "
            f"({reference_memory_mib} MiB), so its figures cannot describe this model"
        )
    total_mib = memory_mib * count
    if weights_mib > total_mib:
        raise DoesNotFit(
            f"torch.OutOfMemoryError: CUDA out of memory. The model's weights take "
            f"{weights_mib} MiB; the device has {total_mib} MiB"
        )
    room = kv_room_mib(
        memory_mib=total_mib, weights_mib=weights_mib, utilization=gpu_memory_utilization
    )
    kv_tokens = int(params.kv_cache_tokens * room / reference_room)
    if kv_tokens < 1:
        raise DoesNotFit(
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    if max_model_len > kv_tokens:
        raise DoesNotFit(
            f"ValueError: The model's max seq len ({max_model_len}) is larger than the maximum "
            f"number of tokens that can be stored in KV cache ({kv_tokens}). Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        )
    return replace(
        params,
        prefill_tokens_per_s=params.prefill_tokens_per_s * compute_ratio * count,
        step_base_s=params.step_base_s / (bandwidth_ratio * count),
        step_per_seq_s=params.step_per_seq_s / (bandwidth_ratio * count),
        kv_cache_tokens=kv_tokens,
    )
