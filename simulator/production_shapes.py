"""Two production shapes the Azure traces lack: steady long prompts, and reasoning evenings.

Both are seeded generators of :class:`~simulator.traces.TraceRequest` lists,
reached as ``synthetic:long-prompt`` and ``synthetic:reasoning``
(:mod:`simulator.synthetic` dispatches here):

- ``long-prompt``: a chat service with retrieval or long documents in its
  prompts, at a steady rate. Prompts log-normal with a median of 7,000 and
  a 99th percentile of 85,000 tokens (sigma 1.07), so that they run from a
  few hundred tokens to over 100,000 (0.1 % are over 190,000, past the
  engine's context, and refused), outputs log-normal around 340 tokens
  (sigma 0.8); the figures of a production chat service's hour (150 to 250
  requests a minute, prompts median 7k and p99 85k, outputs about 340).
  Arrivals are Poisson at a rate that wanders by up to a fifth either side
  of the mean over twenty minutes, as a real service's does: noise a policy
  must not take for demand.
- ``reasoning``: a reasoning model's evening. Short prompts (log-normal,
  median 270 tokens, sigma 1.0) and long, heavy-tailed answers (median 520
  tokens, p99 about 10,000: sigma 1.27), the figures of six evening hours of
  a reasoning model's traffic; the arrival rate swings fivefold from trough
  to peak and back over the run (real hours, not a compressed day: the
  default run is six of them), Poisson around it. Decode binds: a replica's
  batch and KV cache, not its prefill, set how many it serves.

``--synthetic-rate`` is the mean rate in requests a minute for both (for
``reasoning`` the peak is ``2 x ratio / (1 + ratio)`` times the mean, 1.67x
for a fivefold swing).

Main decision: the heavy tails are log-normal, fitted to a median and a
99th percentile (``sigma = ln(p99 / median) / 2.326``), because that is
what the published figures give; the clipping bounds only keep a pathological
draw (a prompt of millions of tokens) out.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from simulator.traces import TraceRequest

__all__ = ["LONG_PROMPT", "REASONING", "long_prompt", "reasoning"]

LONG_PROMPT = "long-prompt"
REASONING = "reasoning"

# The standard normal's 99th percentile: sigma = ln(p99 / median) / _Z99.
_Z99 = 2.326

# long-prompt: prompts median 7,000 and p99 85,000 tokens; outputs about 340.
_LP_PROMPT_MEDIAN = 7_000.0
_LP_PROMPT_SIGMA = math.log(85_000 / 7_000) / _Z99
_LP_OUTPUT_MEDIAN = 340.0
_LP_OUTPUT_SIGMA = 0.8
_LP_MAX_PROMPT = 400_000
_LP_MAX_OUTPUT = 4_000
# The steady rate's slow wander: up to a fifth either side over twenty minutes.
_LP_WANDER = 0.2
_LP_WANDER_PERIOD_S = 1_200.0

# reasoning: prompts median 270; outputs median 520 and p99 10,000 tokens.
_R_PROMPT_MEDIAN = 270.0
_R_PROMPT_SIGMA = 1.0
_R_OUTPUT_MEDIAN = 520.0
_R_OUTPUT_SIGMA = math.log(10_000 / 520) / _Z99
_R_MAX_PROMPT = 16_000
_R_MAX_OUTPUT = 32_000
#: Peak over trough of a reasoning evening's arrival rate.
REASONING_SWING = 5.0


def _lognormal(rng: random.Random, median: float, sigma: float, top: int) -> int:
    return min(max(1, int(median * math.exp(rng.gauss(0.0, sigma)))), top)


def _thinned(
    rng: random.Random, rate: Callable[[float], float], peak_per_s: float, end_s: float
) -> list[float]:
    """Poisson arrivals at ``rate(t)`` (at most ``peak_per_s``) by thinning."""
    times: list[float] = []
    t = rng.expovariate(peak_per_s)
    while t < end_s:
        if rng.random() < rate(t) / peak_per_s:
            times.append(t)
        t += rng.expovariate(peak_per_s)
    return times


def long_prompt(*, duration_s: float, mean_per_min: float, seed: int) -> list[TraceRequest]:
    """Steady long-prompt traffic (see the module docstring)."""
    rng = random.Random(seed)
    mean = mean_per_min / 60.0
    phase = rng.uniform(0.0, 2 * math.pi)

    def rate(t: float) -> float:
        return mean * (1 + _LP_WANDER * math.sin(2 * math.pi * t / _LP_WANDER_PERIOD_S + phase))

    out = []
    for t in _thinned(rng, rate, mean * (1 + _LP_WANDER), duration_s):
        prompt = _lognormal(rng, _LP_PROMPT_MEDIAN, _LP_PROMPT_SIGMA, _LP_MAX_PROMPT)
        output = _lognormal(rng, _LP_OUTPUT_MEDIAN, _LP_OUTPUT_SIGMA, _LP_MAX_OUTPUT)
        out.append(TraceRequest(t, prompt, output))
    return out


def reasoning(*, duration_s: float, mean_per_min: float, seed: int) -> list[TraceRequest]:
    """A reasoning model's evening (see the module docstring)."""
    rng = random.Random(seed)
    ratio = REASONING_SWING
    trough = 2 * mean_per_min / 60.0 / (1 + ratio)
    peak = trough * ratio

    def rate(t: float) -> float:
        # Trough at both ends, peak in the middle of the run.
        return trough * (1 + (ratio - 1) * (1 - math.cos(2 * math.pi * t / duration_s)) / 2)

    out = []
    for t in _thinned(rng, rate, peak, duration_s):
        prompt = _lognormal(rng, _R_PROMPT_MEDIAN, _R_PROMPT_SIGMA, _R_MAX_PROMPT)
        output = _lognormal(rng, _R_OUTPUT_MEDIAN, _R_OUTPUT_SIGMA, _R_MAX_OUTPUT)
        out.append(TraceRequest(t, prompt, output))
    return out
