"""The planner baseline: NVIDIA Dynamo's SLA planner, sizing prefill and decode as Dynamo does.

Dynamo's planner in its throughput-based (predictive) mode
(https://docs.nvidia.com/dynamo/latest/design-docs/component-design/planner-design
and ``components/src/dynamo/planner/defaults.py``, ``utils/planner_core.py``):
every ``adjustment_interval`` (:data:`PLANNER_INTERVAL_S`, 180 s) it observes
the interval's request count and mean input and output lengths (ISL, OSL),
predicts the next interval's with its ``load_predictor`` (default ``arima``)
and sizes

- **prefill** workers: ``ceil(predicted requests x ISL / interval / prefill
  throughput)``, the prefill throughput profiled at that ISL
  (:func:`simulator.profile.prefill_tokens_per_s`);
- **decode** workers: ``ceil(predicted requests x OSL / interval / decode
  throughput)``, the decode throughput profiled at the inter-token objective
  (Dynamo's default ``itl`` 50 ms, :data:`simulator.profile.DEFAULT_ITL_S`)
  and a context of ``ISL + OSL / 2``
  (:func:`simulator.profile.decode_tokens_per_s`);

each at least ``min_endpoint`` (1).

Deviations, stated so that a reader can weigh the row:

- **aggregated replicas**: the simulated replicas serve both phases (vLLM's
  aggregated serving, as every other row), where Dynamo runs them on
  separate workers. One replica's time is shared by the two phases, so the
  replica count asked for is ``ceil(prefill share + decode share)``, each
  share being the phase's predicted load over its profiled throughput.
  Taking the larger share alone leaves each replica short by the smaller:
  on ``synthetic:chat`` at 5,500 requests a minute the larger (prefill, 3.8)
  asks for 4 replicas where 5 are needed, and the row collapses to a
  quarter of the requests within the objective;
- **the predictor** is an ARIMA(1,1,0) fitted by least squares
  (:class:`ArimaPredictor`); Dynamo's ``pmdarima.auto_arima`` picks its
  order by AIC (a fixed low order keeps the simulator free of that
  dependency). Dynamo's rules are kept: leading idle intervals are skipped,
  fewer than 5 points or a constant history predict the last value;
- **no correction factors**: Dynamo scales the prefill and decode
  throughput by observed over expected TTFT and ITL; the profile here is of
  the very engine that serves, so the factors would be 1 but for queueing,
  which the planner's design leaves to the next interval.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from simulator.world import View

__all__ = ["PLANNER_INTERVAL_S", "ArimaPredictor", "Planner"]

#: Dynamo's ``adjustment_interval`` default.
PLANNER_INTERVAL_S = 180.0

_EPSILON = 1e-9


class ArimaPredictor:
    """Next value of a series: ARIMA(1,1,0) by least squares, with Dynamo's guard rails.

    Leading zeros (the idle time before the first request) are skipped;
    with fewer than ``min_points`` values, or a constant history, the last
    value is the prediction; never below zero.
    """

    def __init__(self, min_points: int = 5) -> None:
        self.min_points = min_points
        self.values: list[float] = []

    def add(self, value: float) -> None:
        if value == 0 and not self.values:
            return
        self.values.append(max(0.0, value))

    def predict(self) -> float:
        ys = self.values
        if not ys:
            return 0.0
        if len(ys) < self.min_points or len(set(ys)) == 1:
            return ys[-1]
        diffs = [b - a for a, b in itertools.pairwise(ys)]
        xs, zs = diffs[:-1], diffs[1:]
        mean_x = sum(xs) / len(xs)
        mean_z = sum(zs) / len(zs)
        var = sum((x - mean_x) ** 2 for x in xs)
        phi = 0.0
        if var > 0:
            phi = sum((x - mean_x) * (z - mean_z) for x, z in zip(xs, zs, strict=True)) / var
            phi = max(-0.99, min(0.99, phi))  # stationary differences
        drift = mean_z - phi * mean_x
        return max(0.0, ys[-1] + drift + phi * diffs[-1])


#: ``prefill(isl)`` in prompt tokens/s; ``decode(isl, osl)`` in output tokens/s.
PrefillProfile = Callable[[float], float]
DecodeProfile = Callable[[float, float], float]


class Planner:
    """Dynamo's SLA planner, throughput-based (see the module docstring)."""

    def __init__(
        self,
        *,
        prefill: PrefillProfile,
        decode: DecodeProfile,
        max_replicas: int,
        interval_s: float = PLANNER_INTERVAL_S,
        min_replicas: int = 1,
    ) -> None:
        if interval_s < 1:
            raise ValueError(f"the planner's interval must be >= 1 s, got {interval_s}")
        self.prefill = prefill
        self.decode = decode
        self.max_replicas = max_replicas
        self.interval_s = interval_s
        self.min_replicas = min_replicas
        self.requests = ArimaPredictor()
        self.isl = ArimaPredictor()
        self.osl = ArimaPredictor()
        self.next_s = interval_s
        self.arrivals = 0
        self.tokens_in = 0
        self.tokens_out = 0
        # (prefill, decode) replicas' worth of the last adjustment's prediction
        self.last_shares = (0.0, 0.0)

    @property
    def name(self) -> str:
        return "planner"

    @property
    def initial(self) -> int:
        return self.min_replicas

    def tick(self, view: View, *, activation: bool) -> int | None:
        if view.spec < self.min_replicas:
            # Dynamo keeps at least ``min_endpoint`` workers whatever the interval.
            return self.min_replicas
        if activation:
            return None
        # The frontend's counters: requests and their lengths since the last tick.
        self.arrivals += view.arrivals
        self.tokens_in += view.arrival_prompt_tokens
        self.tokens_out += view.arrival_output_tokens
        if view.now < self.next_s:
            return None
        self.next_s = view.now + self.interval_s
        count = self.arrivals
        self.requests.add(float(count))
        if count:
            self.isl.add(self.tokens_in / count)
            self.osl.add(self.tokens_out / count)
        self.arrivals = self.tokens_in = self.tokens_out = 0
        requests = self.requests.predict()
        if requests <= 0:
            self.last_shares = (0.0, 0.0)
            return self.min_replicas
        isl, osl = max(1.0, self.isl.predict()), max(1.0, self.osl.predict())
        prefill = _share(requests * isl / self.interval_s, self.prefill(isl))
        decode = _share(requests * osl / self.interval_s, self.decode(isl, osl))
        self.last_shares = (prefill, decode)
        want = math.ceil(prefill + decode - _EPSILON)
        return min(max(want, self.min_replicas), self.max_replicas)


def _share(tokens_per_s: float, per_replica: float) -> float:
    """Replicas' worth of one phase's work (a profile of 0: the ceiling will do)."""
    if per_replica <= 0:
        return math.inf if tokens_per_s > 0 else 0.0
    return tokens_per_s / per_replica
