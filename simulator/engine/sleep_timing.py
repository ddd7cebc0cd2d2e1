"""vLLM sleep mode's timings and memory, shared by the fake vLLM and the simulator.

One source for the figures, so that ``tidal simulate``'s warm tier and the
sandbox's fake vLLM (``loadtests.sandbox.servers.sleep_mode``) wake and sleep
in the same time. They follow vLLM's sleep-mode post (blog.vllm.ai,
2025-10-26, "Zero-Reload Model Switching with vLLM Sleep Mode"): a level-1
wake took 0.1-6 s and a level-2 wake 0.8-2.6 s depending on model size,
against 30-100+ s for a cold start. Here:

- level-1 wake of the weights: ``0.1 s + weights / 20 GiB/s`` (host to device copy);
- level-2 wake of the weights: ``0.3 s + weights / 8 GiB/s`` (reload);
- the KV cache: 0.05 s (allocating, not copying: it starts empty);
- level-1 sleep: ``0.1 s + weights / 20 GiB/s``; level-2 sleep: 0.1 s.

Level 2 sits between level 1 and zero: for Llama-3.1-8B (15 GiB of
weights) a level-1 wake takes 0.9 s, a level-2 wake 2.2 s (the reload
reads the weights from the node's page cache, at storage-to-GPU speed
rather than a pinned host-to-device copy), a cold start tens of seconds.
What each level holds while asleep, after the same post and vLLM's
``CuMemAllocator`` (level 1 offloads the allocations tagged ``weights`` to
pinned CPU memory and drops the rest; level 2 drops everything):

- GPU memory: the residual (CUDA context, allocator pools) at either level;
- host memory: the weights at level 1 (:func:`host_memory_mib`), nothing at
  level 2, so a node's RAM bounds how many level-1 sleepers it holds and
  not how many level-2 ones.

Main decision: plain functions of the weights' size and the level, no state,
so both users can call them with their own sizes.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "DEFAULT_RESIDUAL_MIB",
    "DEFAULT_WEIGHTS_MIB",
    "GIB",
    "KV_KIB_PER_TOKEN",
    "host_memory_mib",
    "kv_cache_mib",
    "sleep_seconds",
    "wake_seconds",
]

GIB = 1024.0
# Llama-3.1-8B in bf16: 8.03e9 parameters x 2 bytes.
DEFAULT_WEIGHTS_MIB = 15_320
# 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes = 128 KiB a token.
KV_KIB_PER_TOKEN = 128
# What a sleeping vLLM still holds (CUDA context, allocator pools, graphs).
DEFAULT_RESIDUAL_MIB = 600


def sleep_seconds(weights_mib: int, level: int) -> float:
    """Seconds a sleep of ``level`` takes (level 1 copies the weights to host RAM; other: 2)."""
    return 0.1 + (weights_mib / GIB / 20.0 if level == 1 else 0.0)


def wake_seconds(weights_mib: int, level: int, tags: Iterable[str]) -> float:
    """Seconds a wake of ``tags`` ("weights", "kv_cache") takes after a sleep of ``level``."""
    wanted = set(tags)
    seconds = 0.0
    if "weights" in wanted:
        gib = weights_mib / GIB
        seconds += 0.1 + gib / 20.0 if level == 1 else 0.3 + gib / 8.0
    if "kv_cache" in wanted:
        seconds += 0.05
    return seconds


def host_memory_mib(weights_mib: int, level: int) -> int:
    """Host RAM a replica asleep at ``level`` holds: its weights at level 1, none at level 2."""
    if level not in (1, 2):
        raise ValueError(f"sleep level must be 1 or 2; got {level!r}")
    return weights_mib if level == 1 else 0


def kv_cache_mib(kv_cache_tokens: int) -> int:
    """MiB of a KV cache of this many tokens at Llama-3.1-8B's size per token."""
    return (kv_cache_tokens * KV_KIB_PER_TOKEN + 1023) // 1024
