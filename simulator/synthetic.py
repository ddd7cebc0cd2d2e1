"""Synthetic workloads from published statistics, for patterns the real traces lack.

The two Azure traces cover one hour each. Longer or wider patterns are made
here from published statistics (cited per kind below), seeded,
so that a run is reproducible:

- ``bursts``: Gamma inter-arrival times with shape 0.25 to 0.5 (BurstGPT);
  the default 0.3 at the code trace's mean rate (154 requests/min) gives a
  coefficient of variation of 1/sqrt(0.3) = 1.8;
- ``diurnal``: a day compressed into the run, the rate following a cosine
  from a night trough to a peak 10x higher (code services in the Azure LLM
  trace 2024; chat swings only 2 to 2.5x), arrivals a Poisson process
  thinned to that rate;
- ``many-models``: many rarely used models sharing a pool: each model's rate
  is drawn so that 45 % are invoked at most once an hour and 81 % at most
  once a minute (Azure Functions 2019), the rest more often;
- ``long-context``: Poisson arrivals of long prompts with a heavy tail: the
  means of Mooncake's published trace (Qin et al., FAST 2025: 7,590 input
  and 182 output tokens on average), log-normal with a prompt sigma of 1.5
  (median 2,460 tokens), so that about 2 % of prompts are longer than what
  one replica prefills within 2 s (about 50,000 tokens) and a few are over
  the 131,072-token context and refused;
- ``long-prompt`` (steady traffic with prompts from hundreds to over 100,000
  tokens) and ``reasoning`` (short prompts, long heavy-tailed answers, the
  rate swinging fivefold over real hours): :mod:`simulator.production_shapes`.

Token counts are log-normal around the code trace's medians (1,469 prompt,
13 output tokens; ``chat`` uses the conversation trace's 1,020 and 129), with
a spread (sigma 1.0) that gives the traces' long tails; they are clipped to
what one engine's KV cache holds (``long-context``: prompts are not clipped,
so the context length refuses the longest).

Main decision: generators return :class:`~simulator.traces.TraceRequest`
lists like a parsed file, so everything downstream is the same code.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from simulator.production_shapes import LONG_PROMPT, REASONING, long_prompt, reasoning
from simulator.traces import TraceRequest

__all__ = ["KINDS", "SyntheticSpec", "generate"]

KINDS = ("bursts", "diurnal", "many-models", "long-context", LONG_PROMPT, REASONING)

_MAX_PROMPT = 32_000
_MAX_OUTPUT = 4_000
# Mooncake's means (see the module docstring) and the prompt tail's sigma.
_LONG_PROMPT_MEAN = 7_590
_LONG_OUTPUT_MEAN = 182
_LONG_PROMPT_SIGMA = 1.5
_LONG_MAX_PROMPT = 200_000


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    kind: str = "bursts"
    duration_s: float = 3600.0
    requests_per_min: float = 154.0  # mean rate (many-models: ignored)
    gamma_shape: float = 0.3
    peak_to_trough: float = 10.0
    models: int = 100
    tokens: str = "code"  # code | chat
    seed: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown synthetic workload {self.kind!r}; choose from {list(KINDS)}")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ValueError(f"duration must be > 0 s, got {self.duration_s}")
        if not self.requests_per_min > 0:
            raise ValueError(f"rate must be > 0 requests/min, got {self.requests_per_min}")
        if not 0 < self.gamma_shape <= 10:
            raise ValueError(f"Gamma shape must be within (0, 10], got {self.gamma_shape}")
        if not self.peak_to_trough >= 1:
            raise ValueError(f"peak-to-trough ratio must be >= 1, got {self.peak_to_trough}")
        if self.models < 1:
            raise ValueError(f"need at least one model, got {self.models}")
        if self.tokens not in ("code", "chat"):
            raise ValueError(f"token profile must be 'code' or 'chat', got {self.tokens!r}")


def _tokens(rng: random.Random, profile: str) -> tuple[int, int]:
    prompt_median, output_median = (1469, 13) if profile == "code" else (1020, 129)
    prompt = int(prompt_median * math.exp(rng.gauss(0.0, 1.0)))
    output = int(output_median * math.exp(rng.gauss(0.0, 1.0)))
    return min(max(1, prompt), _MAX_PROMPT), min(max(1, output), _MAX_OUTPUT)


def _long_tokens(rng: random.Random) -> tuple[int, int]:
    # A log-normal's mean is median x exp(sigma^2 / 2).
    median = _LONG_PROMPT_MEAN / math.exp(_LONG_PROMPT_SIGMA**2 / 2)
    prompt = int(median * math.exp(rng.gauss(0.0, _LONG_PROMPT_SIGMA)))
    output = int(_LONG_OUTPUT_MEAN / math.exp(0.5) * math.exp(rng.gauss(0.0, 1.0)))
    return min(max(1, prompt), _LONG_MAX_PROMPT), min(max(1, output), _MAX_OUTPUT)


def _gamma_arrivals(
    rng: random.Random, *, rate_per_s: float, shape: float, end_s: float
) -> list[float]:
    # Mean inter-arrival 1/rate: Gamma(shape, scale) has mean shape x scale.
    scale = 1.0 / (rate_per_s * shape)
    times: list[float] = []
    t = rng.gammavariate(shape, scale)
    while t < end_s:
        times.append(t)
        t += rng.gammavariate(shape, scale)
    return times


def _diurnal_arrivals(
    rng: random.Random, *, mean_per_s: float, ratio: float, end_s: float
) -> list[float]:
    # rate(t) = trough x (1 + (ratio - 1) x (1 - cos(2 pi t / day)) / 2), whose
    # mean over the day is trough x (1 + ratio) / 2 = mean_per_s.
    trough = 2 * mean_per_s / (1 + ratio)
    peak = trough * ratio
    times: list[float] = []
    t = rng.expovariate(peak)
    while t < end_s:
        rate = trough * (1 + (ratio - 1) * (1 - math.cos(2 * math.pi * t / end_s)) / 2)
        if rng.random() < rate / peak:
            times.append(t)
        t += rng.expovariate(peak)
    return times


def _model_rate_per_s(rng: random.Random) -> float:
    # Azure Functions 2019: 45 % of apps at most once an hour, 81 % at most
    # once a minute; within each band the rate is log-uniform.
    u = rng.random()
    if u < 0.45:
        per_hour = math.exp(rng.uniform(math.log(0.25), math.log(1.0)))
    elif u < 0.81:
        per_hour = math.exp(rng.uniform(math.log(1.0), math.log(60.0)))
    else:
        per_hour = math.exp(rng.uniform(math.log(60.0), math.log(1200.0)))
    return per_hour / 3600.0


def generate(spec: SyntheticSpec) -> list[TraceRequest]:
    """A workload as :class:`SyntheticSpec` describes it (see the module docstring)."""
    rng = random.Random(spec.seed)
    rate = spec.requests_per_min / 60.0
    requests: list[TraceRequest] = []
    if spec.kind == "bursts":
        for t in _gamma_arrivals(
            rng, rate_per_s=rate, shape=spec.gamma_shape, end_s=spec.duration_s
        ):
            requests.append(TraceRequest(t, *_tokens(rng, spec.tokens)))
    elif spec.kind == LONG_PROMPT:
        requests = long_prompt(
            duration_s=spec.duration_s, mean_per_min=spec.requests_per_min, seed=spec.seed
        )
    elif spec.kind == REASONING:
        requests = reasoning(
            duration_s=spec.duration_s, mean_per_min=spec.requests_per_min, seed=spec.seed
        )
    elif spec.kind == "long-context":
        for t in _gamma_arrivals(rng, rate_per_s=rate, shape=1.0, end_s=spec.duration_s):
            requests.append(TraceRequest(t, *_long_tokens(rng)))
    elif spec.kind == "diurnal":
        for t in _diurnal_arrivals(
            rng, mean_per_s=rate, ratio=spec.peak_to_trough, end_s=spec.duration_s
        ):
            requests.append(TraceRequest(t, *_tokens(rng, spec.tokens)))
    else:
        width = len(str(spec.models - 1))
        for index in range(spec.models):
            model = f"model-{index:0{width}d}"
            model_rate = _model_rate_per_s(rng)
            t = rng.expovariate(model_rate)
            while t < spec.duration_s:
                requests.append(TraceRequest(t, *_tokens(rng, spec.tokens), model))
                t += rng.expovariate(model_rate)
        requests.sort(key=lambda r: r.offset_s)
    if not requests:
        raise ValueError(
            f"the synthetic {spec.kind} workload drew no request in {spec.duration_s:g} s; "
            "raise the rate or the duration"
        )
    return requests
