"""Synthetic workloads from published statistics, for patterns the real traces lack.

The two Azure traces cover one hour each. Longer or wider patterns are made
here from published statistics (cited per kind below), seeded,
so that a run is reproducible:

- ``bursts``: Gamma inter-arrival times with shape 0.25 to 0.5 (BurstGPT);
  the default 0.3 at the code trace's mean rate (154 requests/min) gives a
  coefficient of variation of 1/sqrt(0.3) = 1.8;
- ``diurnal``: a production day, the rate following a cosine from a
  trough at midnight to a peak at noon 10x higher, as code services swing
  in the Azure LLM inference trace 2024 (Stojkovic et al., "DynamoLLM",
  HPCA 2025: one week of May 2024; chat swings only 2 to 2.5x); arrivals
  a Poisson process thinned to that rate. The day is 24 real hours
  (``day_s``); ``tidal simulate --day-length 20m`` compresses it, as this
  workload once did, into 20 minutes. ``--synthetic-rate`` is the day's
  mean; the default for this kind is that trace's code service, 16.8
  million requests in its week, about 2.4 million a day, 1,667 a minute
  on average and about 3,000 at the noon peak;
- ``week``: seven such days from a Monday midnight, the weekend days at
  :data:`WEEKEND_SHARE` of a weekday's rate (an assumption: the published
  week shows quieter weekends without a figure for how much), with the
  same mean rate over the week;
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

Main decision: generators yield :class:`~simulator.traces.TraceRequest`
records in time order like a parsed file, so everything downstream is the
same code, and they yield them as they are drawn (:func:`stream`), so a
week of millions of requests is never held in memory; :func:`generate`
is the list of them. ``many-models`` draws model by model and sorts, so it
is made whole (it is small: its models are rarely used).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from simulator.production_shapes import LONG_PROMPT, REASONING, long_prompt, reasoning
from simulator.traces import TraceRequest

__all__ = [
    "DAY_S",
    "DEFAULT_DURATION_S",
    "KINDS",
    "PRODUCTION_DAY_PER_MIN",
    "WEEKEND_SHARE",
    "SyntheticSpec",
    "generate",
    "stream",
]

KINDS = ("bursts", "diurnal", "week", "many-models", "long-context", LONG_PROMPT, REASONING)
DAY_S = 86_400.0
#: The Azure LLM inference trace 2024's code service: 16.8 million requests
#: in its week, a mean of 1,667 a minute (the default rate of a production day).
PRODUCTION_DAY_PER_MIN = 16_800_000 / 7 / 1440
#: A weekend day's rate as a share of a weekday's at the same hour (an assumption).
WEEKEND_SHARE = 0.5
#: Each kind's length when none is asked for: an hour, a day, a week.
DEFAULT_DURATION_S = {"diurnal": DAY_S, "week": 7 * DAY_S}

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
    day_s: float = DAY_S  # diurnal, week: the length of a day (shorter: compressed)

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
        if not (math.isfinite(self.day_s) and self.day_s > 0):
            raise ValueError(f"day length must be > 0 s, got {self.day_s}")
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
) -> Iterator[float]:
    # Mean inter-arrival 1/rate: Gamma(shape, scale) has mean shape x scale.
    scale = 1.0 / (rate_per_s * shape)
    t = rng.gammavariate(shape, scale)
    while t < end_s:
        yield t
        t += rng.gammavariate(shape, scale)


def _thinned(
    rng: random.Random, *, peak_per_s: float, rate: _Rate, end_s: float
) -> Iterator[float]:
    """A Poisson process at ``rate(t)`` (never above ``peak_per_s``), by thinning."""
    t = rng.expovariate(peak_per_s)
    while t < end_s:
        if rng.random() < rate(t) / peak_per_s:
            yield t
        t += rng.expovariate(peak_per_s)


class _Rate:
    """The diurnal rate at ``t``: a cosine from the trough at midnight to the peak at noon.

    ``rate(t) = trough x (1 + (ratio - 1) x (1 - cos(2 pi t / day)) / 2)``, whose
    mean over a day is ``trough x (1 + ratio) / 2``; in a week, weekend days
    are scaled by :data:`WEEKEND_SHARE` and the trough chosen so that the
    week's mean is the asked mean.
    """

    def __init__(self, *, mean_per_s: float, ratio: float, day_s: float, week: bool) -> None:
        day_mean = mean_per_s
        if week:
            day_mean = mean_per_s * 7 / (5 + 2 * WEEKEND_SHARE)
        self.trough = 2 * day_mean / (1 + ratio)
        self.peak = self.trough * ratio
        self.ratio = ratio
        self.day_s = day_s
        self.week = week

    def __call__(self, t: float) -> float:
        rate = self.trough * (
            1 + (self.ratio - 1) * (1 - math.cos(2 * math.pi * t / self.day_s)) / 2
        )
        if self.week and int(t // self.day_s) % 7 >= 5:
            rate *= WEEKEND_SHARE
        return rate


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


def stream(spec: SyntheticSpec) -> Iterator[TraceRequest]:
    """The workload :class:`SyntheticSpec` describes, in time order, drawn as it is read.

    Every arrival time is drawn before any token count, from one seeded
    generator (so a seed gives the workload it always gave): the token
    counts come from a second generator that first runs through the
    arrival draws, which costs a second pass over them and no memory.
    """
    drawn = 0
    if spec.kind in (LONG_PROMPT, REASONING):
        shape = long_prompt if spec.kind == LONG_PROMPT else reasoning
        drawn_here = shape(
            duration_s=spec.duration_s, mean_per_min=spec.requests_per_min, seed=spec.seed
        )
        if not drawn_here:
            raise ValueError(
                f"the synthetic {spec.kind} workload drew no request in {spec.duration_s:g} s; "
                "raise the rate or the duration"
            )
        yield from drawn_here
        return
    tokens_rng = random.Random(spec.seed)
    for _ in _times(spec, tokens_rng):
        pass
    if spec.kind == "long-context":

        def tokens() -> tuple[int, int]:
            return _long_tokens(tokens_rng)
    else:

        def tokens() -> tuple[int, int]:
            return _tokens(tokens_rng, spec.tokens)

    if spec.kind == "many-models":
        for request in _many_models(random.Random(spec.seed), spec):
            drawn += 1
            yield request
    else:
        for t in _times(spec, random.Random(spec.seed)):
            drawn += 1
            yield TraceRequest(t, *tokens())
    if not drawn:
        raise ValueError(
            f"the synthetic {spec.kind} workload drew no request in {spec.duration_s:g} s; "
            "raise the rate or the duration"
        )


def _times(spec: SyntheticSpec, rng: random.Random) -> Iterator[float]:
    """The arrival times of ``spec``'s kind (none for many-models, drawn per model)."""
    rate = spec.requests_per_min / 60.0
    if spec.kind == "bursts":
        yield from _gamma_arrivals(
            rng, rate_per_s=rate, shape=spec.gamma_shape, end_s=spec.duration_s
        )
    elif spec.kind == "long-context":
        yield from _gamma_arrivals(rng, rate_per_s=rate, shape=1.0, end_s=spec.duration_s)
    elif spec.kind in ("diurnal", "week"):
        shape = _Rate(
            mean_per_s=rate,
            ratio=spec.peak_to_trough,
            day_s=spec.day_s,
            week=spec.kind == "week",
        )
        yield from _thinned(rng, peak_per_s=shape.peak, rate=shape, end_s=spec.duration_s)


def _many_models(rng: random.Random, spec: SyntheticSpec) -> list[TraceRequest]:
    requests: list[TraceRequest] = []
    width = len(str(spec.models - 1))
    for index in range(spec.models):
        model = f"model-{index:0{width}d}"
        model_rate = _model_rate_per_s(rng)
        t = rng.expovariate(model_rate)
        while t < spec.duration_s:
            requests.append(TraceRequest(t, *_tokens(rng, spec.tokens), model))
            t += rng.expovariate(model_rate)
    requests.sort(key=lambda r: r.offset_s)
    return requests


def generate(spec: SyntheticSpec) -> list[TraceRequest]:
    """The workload :class:`SyntheticSpec` describes, as a list (see :func:`stream`)."""
    return list(stream(spec))
