"""vLLM's sleep mode for the fake server: states, timings and GPU memory.

vLLM (``--enable-sleep-mode``, endpoints only with ``VLLM_SERVER_DEV_MODE=1``)
can release a running replica's GPU memory and take it back without a
restart. Level 1 copies the weights to host RAM and drops the KV cache;
level 2 drops both, so a wake must reload the weights. The real sequence
after a level-2 sleep is ``POST /wake_up?tags=weights``, ``POST
/collective_rpc`` with ``{"method": "reload_weights"}``, then ``POST
/wake_up?tags=kv_cache``; a plain ``/wake_up`` takes back everything.

Timings (model time, so ``--speedup`` scales them; the formulas live in
:mod:`simulator.engine.sleep_timing`, shared with ``tidal simulate``) follow vLLM's sleep-mode
post (blog.vllm.ai, 2025-10-26, "Zero-Reload Model Switching with vLLM Sleep
Mode"): a level-1 wake took 0.1-6 s and a level-2 wake 0.8-2.6 s depending
on model size, against 30-100+ s for a cold start; the first request after a
wake without a one-token warm-up took 4.12 s against 0.96 s with one. Here:

- level-1 wake: ``0.1 s + weights / 20 GiB/s`` (host to device copy);
- level-2 wake of the weights: ``0.3 s + weights / 8 GiB/s`` (reload);
- level-1 sleep: ``0.1 s + weights / 20 GiB/s``; level-2 sleep: 0.1 s;
- the first inference after a wake runs slow (cold caches and allocator):
  it pays ``first_request_penalty_s`` scaled by its output length, in full
  from 256 tokens on, so a one-token warm-up pays about 1/256 of it and
  takes the penalty away from the request that follows.

Host memory: a level-1 sleep moves the weights to pinned host RAM
(:func:`~simulator.engine.sleep_timing.host_memory_mib`), taken from the
node's memory, which every server on the node shares through a
:class:`HostLedger`; a level-2 sleep drops them and takes none. A level-1
sleep that does not fit is refused with a 500 and the server stays awake
and serving (a real vLLM's pinned allocation fails with a CUDA error there,
and the caller is better served by a clean refusal it can answer with a
level-2 sleep or a scale to zero); the wake of the weights gives the room back.

GPU memory: several fake servers may share one physical GPU (time-sliced
replicas of the NVIDIA device plugin). They keep one ledger per GPU, a
directory with one file per server process holding the MiB it uses; taking
memory reads the others' files under an exclusive ``flock`` and fails when
the sum would pass the GPU's budget, as a CUDA allocation would. Files of
processes that are gone are ignored, so a crashed server frees its share.

Main decision: the state machine here is pure (no I/O, time passed in);
:class:`GpuLedger` is the only part that touches files, and the HTTP layer
(``vllm``) only translates.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simulator.engine.sleep_timing import (
    DEFAULT_RESIDUAL_MIB,
    DEFAULT_WEIGHTS_MIB,
    host_memory_mib,
    kv_cache_mib,
    sleep_seconds,
    wake_seconds,
)

__all__ = [
    "DEFAULT_WEIGHTS_MIB",
    "GpuLedger",
    "HostLedger",
    "SleepError",
    "SleepMachine",
    "SleepParams",
    "WakeTag",
    "kv_cache_mib",
]

WakeTag = Literal["weights", "kv_cache"]
WAKE_TAGS: tuple[WakeTag, ...] = ("weights", "kv_cache")

# The first request after a wake pays the whole penalty from this many output tokens.
PENALTY_FULL_TOKENS = 256


class SleepError(Exception):
    """A sleep-mode call that cannot be done; ``status`` is the HTTP answer."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class SleepParams:
    """Memory and timing of one fake server's sleep mode (MiB, model seconds)."""

    weights_mib: int = DEFAULT_WEIGHTS_MIB
    kv_cache_mib: int = 0
    residual_mib: int = DEFAULT_RESIDUAL_MIB
    # The physical GPU's framebuffer (H100 80GB, as LlmParams); 0: no limit.
    gpu_memory_mib: int = 81_920
    first_request_penalty_s: float = 3.0

    def __post_init__(self) -> None:
        for name in ("weights_mib", "kv_cache_mib", "residual_mib", "gpu_memory_mib"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0 MiB; got {value!r}")
        if not self.first_request_penalty_s >= 0:
            raise ValueError(
                f"first_request_penalty_s must be >= 0; got {self.first_request_penalty_s!r}"
            )

    @property
    def awake_mib(self) -> int:
        return self.residual_mib + self.weights_mib + self.kv_cache_mib

    def sleep_s(self, level: int) -> float:
        return sleep_seconds(self.weights_mib, level)

    def wake_s(self, level: int, tags: tuple[WakeTag, ...]) -> float:
        """Model seconds a wake of these tags takes after a sleep of ``level``."""
        return wake_seconds(self.weights_mib, level, tags)


class SleepMachine:
    """Which parts of the model are on the GPU, and what each call changes.

    ``level`` is the level of the last sleep (0: never slept since the
    weights were last loaded). After a level-2 sleep the weights on the GPU
    are garbage until ``reload_weights``.
    """

    def __init__(self, params: SleepParams) -> None:
        self.params = params
        self.weights_on_gpu = True
        self.kv_on_gpu = True
        self.weights_valid = True
        self.level = 0
        self.penalty_due = False
        self.sleeps = 0
        self.wakes = 0

    @property
    def sleeping(self) -> bool:
        return not (self.weights_on_gpu and self.kv_on_gpu)

    @property
    def serving(self) -> bool:
        return not self.sleeping and self.weights_valid

    @property
    def state(self) -> str:
        """vLLM's ``vllm:engine_sleep_state`` label: awake, weights_offloaded or discard_all."""
        if not self.sleeping:
            return "awake"
        return "weights_offloaded" if self.level == 1 else "discard_all"

    def host_mib(self) -> int:
        """Host RAM held now: the weights, while a level-1 sleep keeps them off the GPU."""
        if self.weights_on_gpu or self.level != 1:
            return 0
        return host_memory_mib(self.params.weights_mib, 1)

    def sleep_host_mib(self, level: int) -> int:
        """Host RAM held once a sleep of ``level`` is done (asleep already: what is held)."""
        if self.sleeping or level not in (1, 2):
            return self.host_mib()
        return host_memory_mib(self.params.weights_mib, level)

    def gpu_mib(self) -> int:
        p = self.params
        return (
            p.residual_mib
            + (p.weights_mib if self.weights_on_gpu else 0)
            + (p.kv_cache_mib if self.kv_on_gpu else 0)
        )

    def sleep(self, level: int, *, busy: bool) -> float:
        """Put the model to sleep; the model seconds it takes."""
        if level not in (1, 2):
            raise SleepError(f"sleep level must be 1 or 2; got {level!r}")
        if busy:
            # vLLM would pause and drop the running requests; the fake refuses
            # so that a scaler bug that sleeps a busy replica shows up loudly.
            raise SleepError("requests are running or waiting; refusing to sleep", status=409)
        if self.sleeping:
            return 0.0
        self.weights_on_gpu = False
        self.kv_on_gpu = False
        self.level = level
        if level == 2:
            self.weights_valid = False
        self.sleeps += 1
        return self.params.sleep_s(level)

    def wake_cost(self, tags: tuple[WakeTag, ...]) -> tuple[int, float]:
        """(MiB the wake takes, model seconds) for waking these tags now."""
        p = self.params
        todo = tuple(
            t for t in tags if not (self.weights_on_gpu if t == "weights" else self.kv_on_gpu)
        )
        mib = sum(p.weights_mib if t == "weights" else p.kv_cache_mib for t in todo)
        return mib, p.wake_s(self.level or 1, todo)

    def woke(self, tags: tuple[WakeTag, ...]) -> None:
        """Record a wake the caller found room for."""
        was_sleeping = self.sleeping
        for tag in tags:
            if tag == "weights":
                self.weights_on_gpu = True
                if self.level == 1:
                    self.weights_valid = True  # they came back from host RAM
            else:
                self.kv_on_gpu = True
        if was_sleeping and not self.sleeping:
            self.wakes += 1
            self.penalty_due = True

    def reload_weights(self) -> float:
        if not self.weights_on_gpu:
            raise SleepError(
                "reload_weights needs the weights' memory: call /wake_up?tags=weights first",
                status=409,
            )
        self.weights_valid = True
        return 0.0  # the wake of the weights already carried the reload time

    def take_penalty(self, output_tokens: int) -> float:
        """Extra model seconds for this request: the first after a wake pays."""
        if not self.penalty_due:
            return 0.0
        self.penalty_due = False
        share = min(1.0, max(1, output_tokens) / PENALTY_FULL_TOKENS)
        return self.params.first_request_penalty_s * share


def parse_tags(values: list[str]) -> tuple[WakeTag, ...]:
    """``tags`` query values (repeated or comma-separated); none means all."""
    tags: list[WakeTag] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            tag = next((t for t in WAKE_TAGS if t == part), None)
            if tag is None:
                raise SleepError(f"unknown wake tag {part!r}; allowed: weights, kv_cache")
            if tag not in tags:
                tags.append(tag)
    return tuple(tags) if tags else WAKE_TAGS


class GpuLedger:
    """The MiB each server on one physical GPU holds, shared through files.

    ``directory`` None: this server is alone on its GPU (only its own total
    counts against the budget).
    """

    def __init__(self, directory: Path | None, *, budget_mib: int) -> None:
        self.directory = directory
        self.budget_mib = budget_mib
        self._own = 0
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            # The pid says whether the holder still lives; the suffix tells
            # apart servers that share one process (tests).
            self._file = directory / f"{os.getpid()}.{uuid.uuid4().hex[:12]}.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self.directory is None:
            yield
            return
        with open(self.directory / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def others_mib(self) -> int:
        if self.directory is None:
            return 0
        total = 0
        for path in self.directory.glob("*.json"):
            if path == self._file:
                continue
            try:
                pid = int(path.name.split(".", 1)[0])
                os.kill(pid, 0)
            except (ValueError, ProcessLookupError):
                continue  # a process that is gone frees its memory
            except PermissionError:
                pass  # alive, someone else's
            try:
                total += int(json.loads(path.read_text())["mib"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return total

    def refusal(self, mib: int, others: int) -> SleepError:
        """What a holding of ``mib`` that does not fit beside ``others`` MiB raises."""
        return SleepError(
            f"CUDA out of memory: need {mib} MiB, {others} MiB of the GPU's "
            f"{self.budget_mib} MiB are held by other processes",
            status=500,
        )

    def set(self, mib: int, *, check: bool) -> None:
        """Hold ``mib`` in all; with ``check``, raise SleepError when it does not fit."""
        with self._locked():
            others = self.others_mib()
            if check and self.budget_mib and others + mib > self.budget_mib:
                raise self.refusal(mib, others)
            self._own = mib
            if self.directory is not None:
                tmp = self._file.with_name(self._file.name + ".tmp")
                tmp.write_text(json.dumps({"mib": mib}))
                tmp.replace(self._file)

    def release(self) -> None:
        if self.directory is not None:
            with self._locked():
                self._file.unlink(missing_ok=True)
        self._own = 0

    @property
    def own_mib(self) -> int:
        return self._own


class HostLedger(GpuLedger):
    """The host RAM each server on one node holds (level-1 sleepers' weights), shared by files."""

    def refusal(self, mib: int, others: int) -> SleepError:
        return SleepError(
            f"cannot offload the weights to host memory: pinned allocation of {mib} MiB failed; "
            f"{others} MiB of the node's {self.budget_mib} MiB are held by other sleeping "
            "servers (sleep at level 2 instead, which keeps nothing in host memory)",
            status=500,
        )
