"""Pure performance models of GPU inference servers, driven by a clock passed in.

- :mod:`scaler.sim.engine.llm`: a vLLM-like continuous-batching engine
  (``LlmEngine``), its parameters (``LlmParams``, defaults for Llama-3.1-8B on
  one H100, with sources) and ``simulate``, which runs a list of arrivals
  through it on a simulated clock;
- :mod:`scaler.sim.engine.batching`: a Triton-like dynamic batcher;
- :mod:`scaler.sim.engine.utilization`: GPU utilization from busy time.

Nothing here reads a clock, sleeps or does I/O: the fake model servers of the
sandbox drive these models in real time, and the policy simulator can drive the
same models in simulated time.
"""

from scaler.sim.engine.batching import BatcherParams, BatchOutcome, BatchPlan, DynamicBatcher
from scaler.sim.engine.llm import (
    Arrival,
    KvEventRecorder,
    LlmEngine,
    LlmParams,
    RequestRecord,
    StepOutcome,
    StepPlan,
    simulate,
)
from scaler.sim.engine.utilization import UtilizationMeter

__all__ = [
    "Arrival",
    "BatchOutcome",
    "BatchPlan",
    "BatcherParams",
    "DynamicBatcher",
    "KvEventRecorder",
    "LlmEngine",
    "LlmParams",
    "RequestRecord",
    "StepOutcome",
    "StepPlan",
    "UtilizationMeter",
    "simulate",
]
