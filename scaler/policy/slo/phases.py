"""A replica's capacity in both phases, prefill and decode, learned online: pure.

A continuous-batching server (vLLM, and the engine model the simulator and
the sandbox's fake vLLM run) works in steps. Each step reads the weights once
(``base`` seconds), decodes one token for every running sequence
(``per_seq`` seconds each) and spends the rest on prompt tokens (``1/P``
seconds each). Over any interval in which a replica always has a sequence
running, its time is all steps, so per replica-second::

    steps x base + generated x per_seq + prompt / P = 1

with ``steps`` = generated tokens over the sequences running (each step
emits one token per running sequence). Every such *busy* interval is one
equation in three unknowns; :class:`PhaseFit` solves them by ridge
regression (decayed sums, pulled toward the prior of an 8B model on one
H100), so the model is learned from ordinary busy traffic, not only from
saturation. One mix of traffic fixes one plane of solutions and sizing for
that same mix is right anywhere on it; a mix that moves fixes all three.

Capacity follows from the fit. A replica serves prompt tokens ``p`` and
generated tokens ``g`` per second without queueing while::

    p / P + g x (per_seq + base / slots) <= 1

where ``slots`` is the most sequences it runs at once (``max-num-seqs``, or
fewer where the KV cache fills first): at a full batch a generated token
costs ``per_seq + base / slots``, ``1 / G`` for a decode rate ``G``. With
an inter-token objective ``T`` each step must also end within ``T``:
``p / P + g x per_seq <= 1 - base / T``. :meth:`PhaseFit.work_s` turns a
load into the replica-seconds it needs under both, and the phase whose
share is larger is the one that binds.

Main decision, ``slots`` is learned only where decode is what holds the
server back: requests wait on the servers at both ends of an interval and
the running count sits at the same level (a cap), or the KV cache is full,
and prompts are under half the work. A server queueing behind long prompts
runs few sequences because prefill binds, and learning that as its batch
would size a long-context model for decode it does not do.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from scaler.policy.api import LoadTotals
from scaler.policy.slo.load import fewest

__all__ = [
    "PRIOR_DECODE_STEP_S",
    "PRIOR_PER_SEQUENCE_S",
    "PRIOR_SLOTS",
    "PhaseFit",
    "learn_phases",
]

#: Seconds a step takes whatever its batch (the weights read once): an 8B model
#: on one H100 takes about 7 ms, a 70B on two about 20.
PRIOR_DECODE_STEP_S = 0.007
#: Seconds each running sequence adds to a step (KV reads, sampling).
PRIOR_PER_SEQUENCE_S = 0.00005
#: Sequences a replica runs at once before it is seen full: vLLM's default
#: ``max-num-seqs``.
PRIOR_SLOTS = 256.0

# The prefill rate the fit is pulled toward and measured in: the prompt-only
# capacity's prior (between a 70B and an 8B model).
_PRIOR_PREFILL_TOKENS_PER_S = 12_000.0
# The prior counts as this many replica-seconds of evidence (ridge strength):
# enough to hold the fit before data, little against a minute of busy replicas.
_PRIOR_WEIGHT_S = 2.0
# Busy replica-seconds before the fit replaces the prefill-only capacity.
_TRUSTED_S = 30.0
# Replica-seconds of busy time the fit remembers (older evidence fades): a few
# minutes of a small fleet, enough to see the mix move.
_MEMORY_S = 600.0
# A server is busy throughout an interval when it runs at least this many
# sequences per replica at both ends (least-loaded balancing leaves one idle
# now and then at fewer).
_BUSY_PER_REPLICA = 2.0
# A full KV cache (vLLM preempts beyond it).
_KV_FULL = 0.9
# KV-cache use past which the sequences running tell how many it holds.
_KV_BATCH = 0.5
# A batch at its cap is decode's limit only where prompts take less than this
# share of the replicas' time (at the prompt-only capacity).
_DECODE_PROMPT_SHARE = 0.25
# The smallest batch taken for a cap: fewer running per replica on average is
# queues on some replicas beside idle ones (vLLM's max-num-seqs is rarely under 8).
_MIN_CAP = 4.0
# Bounds of each parameter against its prior: a fit outside says the equation
# is wrong for this server (idle gaps inside a "busy" interval), not the server.
_RANGE = (0.2, 5.0)


def _solve3(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting for a 3x3 system."""
    m = [[*row, rhs] for row, rhs in zip(a, b, strict=True)]
    for col in range(3):
        pivot = max(range(col, 3), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(3):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    return [m[i][3] / m[i][i] for i in range(3)]


@dataclass(frozen=True, slots=True)
class PhaseFit:
    """The step model's parameters and the evidence behind them.

    ``sums``: the decayed normal equations of the busy intervals, in the
    prior's units (``xx`` upper triangle 11, 12, 13, 22, 23, 33, then
    ``xy`` 1, 2, 3); ``replica_seconds``: the busy time they hold.
    ``prior``: the step, per-sequence and prefill values the fit starts from
    and is pulled toward (:meth:`scaled`: another device's).
    """

    step_s: float = PRIOR_DECODE_STEP_S
    per_seq_s: float = PRIOR_PER_SEQUENCE_S
    prefill_tokens_per_s: float | None = None  # None: not learned (the caller's prior)
    slots: float = PRIOR_SLOTS
    slots_learned: bool = False
    sums: tuple[float, ...] = (0.0,) * 9
    replica_seconds: float = 0.0
    prior: tuple[float, float, float] = (
        PRIOR_DECODE_STEP_S,
        PRIOR_PER_SEQUENCE_S,
        _PRIOR_PREFILL_TOKENS_PER_S,
    )

    @classmethod
    def scaled(cls, *, compute: float, bandwidth: float, slots: float = PRIOR_SLOTS) -> PhaseFit:
        """The prior of a replica ``compute`` times as fast at prefill and ``bandwidth``
        times at decode as the one the priors describe, running at most ``slots``
        sequences (a GPU shape's prior: docs/shapes.md)."""
        if not (compute > 0 and bandwidth > 0 and slots >= 1):
            raise ValueError(
                f"compute and bandwidth must be above 0 and slots at least 1, got "
                f"{compute!r}, {bandwidth!r}, {slots!r}"
            )
        step, per_seq = PRIOR_DECODE_STEP_S / bandwidth, PRIOR_PER_SEQUENCE_S / bandwidth
        prefill = _PRIOR_PREFILL_TOKENS_PER_S * compute
        return cls(step_s=step, per_seq_s=per_seq, slots=slots, prior=(step, per_seq, prefill))

    @property
    def trusted(self) -> bool:
        return self.replica_seconds >= _TRUSTED_S

    def decode_tokens_per_s(self, slo_tpot_s: float | None = None) -> float:
        """Generated tokens per second one replica sustains with a full batch (and,
        with an inter-token objective, with steps no longer than it)."""
        full = self.slots / (self.step_s + self.per_seq_s * self.slots)
        if slo_tpot_s is None:
            return full
        at_tpot = max(0.0, slo_tpot_s - self.step_s) / self.per_seq_s / slo_tpot_s
        return min(full, at_tpot)

    def answer_s(self, tokens: float) -> float:
        """Seconds an answer of ``tokens`` takes to decode in a half-full batch."""
        return max(0.0, tokens) * (self.step_s + self.per_seq_s * self.slots / 2)

    def work_s(
        self, prompt: float, generated: float, *, prefill_per_s: float, slo_tpot_s: float | None
    ) -> tuple[float, float]:
        """Replica-seconds that ``prompt`` and ``generated`` tokens need, as
        ``(prefill, decode)`` shares (their sum is the work; see the module docstring)."""
        return self.work_of(prefill_per_s=prefill_per_s, slo_tpot_s=slo_tpot_s)(prompt, generated)

    def work_of(
        self, *, prefill_per_s: float, slo_tpot_s: float | None
    ) -> Callable[[float, float], tuple[float, float]]:
        """:meth:`work_s` at one prefill rate and objective, for many intervals' tokens."""
        per_token = self.per_seq_s + self.step_s / self.slots
        if slo_tpot_s is None:
            return lambda prompt, generated: (prompt / prefill_per_s, generated * per_token)
        # The inter-token bound: p/P + g per_seq <= 1 - base/T, as a work.
        room = max(0.05, 1.0 - self.step_s / slo_tpot_s)
        per_seq = self.per_seq_s

        def bounded(prompt: float, generated: float) -> tuple[float, float]:
            pre = prompt / prefill_per_s
            return pre, max(generated * per_token, (pre + generated * per_seq) / room - pre)

        return bounded

    def learn(
        self, steps: float, generated: float, prompt: float, replica_seconds: float
    ) -> PhaseFit:
        """This fit with one busy interval's ``steps``, tokens and replica-seconds."""
        if replica_seconds <= 0 or not math.isfinite(steps + generated + prompt):
            return self
        keep = math.exp(-replica_seconds / _MEMORY_S)
        prior_step, prior_per_seq, prior_prefill = self.prior
        # Per replica-second, in units of the prior (so every coordinate is near 1).
        x = (
            steps * prior_step / replica_seconds,
            generated * prior_per_seq / replica_seconds,
            prompt / prior_prefill / replica_seconds,
        )
        w = replica_seconds
        pairs = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))
        xx = [self.sums[i] * keep + w * x[a] * x[b] for i, (a, b) in enumerate(pairs)]
        xy = [self.sums[6 + i] * keep + w * x[i] for i in range(3)]
        spent = self.replica_seconds * keep + replica_seconds
        lam = _PRIOR_WEIGHT_S
        matrix = [
            [xx[0] + lam, xx[1], xx[2]],
            [xx[1], xx[3] + lam, xx[4]],
            [xx[2], xx[4], xx[5] + lam],
        ]
        theta = _solve3(matrix, [xy[0] + lam, xy[1] + lam, xy[2] + lam])
        sums = (*xx, *xy)
        if theta is None:
            return replace(self, sums=sums, replica_seconds=spent)
        lo, hi = _RANGE
        t = [min(hi, max(lo, v)) for v in theta]
        return replace(
            self,
            step_s=prior_step * t[0],
            per_seq_s=prior_per_seq * t[1],
            prefill_tokens_per_s=prior_prefill / t[2],
            sums=sums,
            replica_seconds=spent,
        )

    def with_slots(self, running_per_replica: float) -> PhaseFit:
        """A batch seen full: the first sets it, later ones move it halfway."""
        if running_per_replica < 1:
            return self
        slots = (
            running_per_replica
            if not self.slots_learned
            else (self.slots + running_per_replica) / 2
        )
        return replace(self, slots=slots, slots_learned=True)


def learn_phases(
    fit: PhaseFit,
    before: LoadTotals | None,
    after: LoadTotals,
    *,
    interval_s: float,
    ready_before: int,
    ready: int,
    prefill_per_s: float,
) -> PhaseFit:
    """``fit`` with the interval between two readings, where the servers show it busy
    (see the module docstring); unchanged where they publish no running count."""
    if before is None or interval_s <= 0 or ready < 1 or ready != ready_before:
        return fit
    if before.running is None or after.running is None:
        return fit
    generated = after.generated_tokens - before.generated_tokens
    prompt = max(
        after.prefilled_tokens - before.prefilled_tokens,
        after.served_prompt_tokens - before.served_prompt_tokens,
    )
    low = min(before.running, after.running)
    if generated <= 0 or prompt < 0 or low < _BUSY_PER_REPLICA * ready:
        return fit
    # Every replica running something at both ends, where the servers say: the
    # sums alone read a queue on some replicas beside idle others as busy.
    least = fewest(before.running_least, after.running_least)
    if least is not None and least < 1:
        return fit
    running = (before.running + after.running) / 2
    replica_s = interval_s * ready
    kv_low = min(before.kv_cache_utilization or 0.0, after.kv_cache_utilization or 0.0)
    kv_high = max(before.kv_cache_utilization or 0.0, after.kv_cache_utilization or 0.0)
    # A full KV cache preempts sequences, whose prompts are computed again and
    # counted once: such an interval is not the step model's.
    learned = fit
    if kv_high < _KV_FULL:
        learned = fit.learn(generated / (running / ready), generated, prompt, replica_s)
    per_replica = running / ready
    if kv_low >= _KV_BATCH:
        # The batch the KV cache holds at this mix: the sequences running over the
        # share of the cache they fill, up to where it preempts.
        return learned.with_slots(per_replica / ((kv_low + kv_high) / 2) * _KV_FULL)
    # Requests wait while the batch sits at a cap (max-num-seqs) with room in the
    # cache, and the prompts are a small part of the work: decode holds them back,
    # not prefill (a server queueing behind long prompts runs few sequences
    # because prefill binds, and that is not its batch).
    waiting = min(before.server_waiting, after.server_waiting) >= ready
    queued = fewest(before.waiting_least, after.waiting_least)
    if queued is not None:
        waiting = queued >= 1  # a queue on every replica
    capped = abs(before.running - after.running) < 0.5 * ready
    prompt_share = prompt / replica_s / prefill_per_s
    at_cap = waiting and capped and per_replica >= _MIN_CAP
    if at_cap and prompt_share < _DECODE_PROMPT_SHARE:
        return learned.with_slots(per_replica)
    return learned
