"""The history as the replay sees it, and what makes a request late there: pure.

Sizing (:mod:`scaler.policy.slo.sizing`) asks, for a candidate count ``n``,
how many of the history's requests would have waited past the objective
(:mod:`scaler.policy.slo.fleet_replay` counts them, at many ``n`` per decision).
Each decision interval of the history is one :class:`Step`: its prompt
work (replica-seconds of prefill), the decode in progress (replicas busy
decoding, smoothed) and its requests. Two things make a request late:

- **prefill**: the prompt work ahead of it. Prompts queue in a fluid queue
  served at what the replicas have left after decode, ``n - decode``; a
  request is late when the work ahead of it takes longer than its wait
  allowance (the objective less its own prefill);
- **decode**: no slot for it. A replica runs at most ``slots`` sequences
  (its batch, or what its KV cache holds); sequences arrive and leave as a
  many-server queue does, so a fleet of ``n`` replicas keeps a request
  from waiting for a slot while the decode in progress (in full-batch
  replicas) stays under ``n`` by the square-root margin
  ``DECODE_MARGIN x sqrt(decode / slots)`` (Halfin and Whitt's staffing
  rule: a fleet's spare slots grow with the square root of its load, so a
  large fleet runs fuller than a small one at the same risk). An interval
  past that bound counts every request in it late.

Main decision, decode is a rate, not a lump: a request's decode runs for as
long as its answer takes, not the instant it arrives, so the decode work
of each interval's arrivals is spread with an exponential window as long as
a mean answer takes (:func:`steps`). Counting a long answer's whole decode
at its arrival, as a burst of work in the prefill queue, made a few
10,000-token answers look like a backlog that delays every first token and
bought replicas that decode traffic does not need.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["DECODE_MARGIN", "Step", "decode_bound", "steps"]

#: The square-root staffing margin of decode: with ``a`` sequences in progress
#: over ``N`` slots, a request waits for one with a probability that depends on
#: ``(N - a) / sqrt(a)``; at 1.5 about 8 % wait at all, and for a few hundred
#: milliseconds when the answers take seconds.
DECODE_MARGIN = 1.5
# The decode window's bounds (seconds): at least a step's worth of answers,
# at most two minutes (an answer of thousands of tokens).
_MIN_DECODE_WINDOW_S = 2.0
_MAX_DECODE_WINDOW_S = 120.0
# Each replica's own queue is judged on the last minute's rates: long enough for
# a queue of long prompts to settle, short enough to follow the load.
_QUEUE_WINDOW_S = 60.0


class Step(NamedTuple):
    """One interval of the history as sizing sees it."""

    dt: float  # seconds
    prefill: float  # replica-seconds of prompt work that arrived in it
    decode: float  # replicas busy decoding through it (full-batch replica-seconds per second)
    requests: float  # its requests that a fleet can serve in time (the hopeless left out)
    # The last minute's arrivals per second and prompt work per second (replicas),
    # smoothed: what each replica's own queue sees (scaler.policy.slo.blocking).
    rate: float = 0.0
    load: float = 0.0
    # The replicas its decode needs so that a request rarely waits for a slot
    # (decode_bound): at fewer, every request in it is late.
    needs: float = 0.0


def steps(
    intervals: Sequence[tuple[float, float, float, float, float]],
    answer_s: float,
    slots: float,
) -> list[Step]:
    """``(dt, prefill, decode work, requests, arrivals)`` per interval as steps, the
    decode work spread over ``answer_s`` (how long a mean answer takes) by an
    exponential window (see the module docstring), the arrivals and the prompt work
    smoothed over ``_QUEUE_WINDOW_S``, and the replicas the decode needs at a batch
    of ``slots``."""
    tau = min(_MAX_DECODE_WINDOW_S, max(_MIN_DECODE_WINDOW_S, answer_s))
    out: list[Step] = []
    level = rate = load = 0.0
    slots = max(1.0, slots)
    # The windows' weights are the same for every interval of a length (nearly all
    # are one decision interval long): worked out once per length.
    last_dt = keep = fade = queue_keep = queue_fade = 0.0
    for dt, prefill, decode, requests, arrivals in intervals:
        if dt <= 0:
            continue
        if dt != last_dt:
            last_dt, keep = dt, math.exp(-dt / tau)
            queue_keep = math.exp(-dt / _QUEUE_WINDOW_S)
            fade, queue_fade = 1.0 - keep, 1.0 - queue_keep
        # The level a constant rate of decode work would settle at is that rate;
        # the window moves it toward this interval's rate.
        level = level * keep + (decode / dt) * fade
        rate = rate * queue_keep + (arrivals / dt) * queue_fade
        load = load * queue_keep + (prefill / dt) * queue_fade
        # decode_bound, written out: this loop runs over the whole history each decision.
        needs = level + DECODE_MARGIN * math.sqrt(level / slots) if level > 0 else 0.0
        out.append(_new_step(Step, (dt, prefill, level, requests, rate, load, needs)))
    return out


# A Step from its seven fields, without the keyword handling of Step(...).
_new_step = tuple.__new__


def decode_bound(decode: float, slots: float) -> float:
    """The replicas that decode ``decode`` full-batch replicas' worth of sequences with
    no request waiting for a slot but rarely (module docstring)."""
    if decode <= 0:
        return 0.0
    return decode + DECODE_MARGIN * math.sqrt(decode / max(1.0, slots))
