"""Pure performance models of GPU inference servers, driven by a clock passed in.

- :mod:`simulator.engine.params`: the model's performance knobs
  (``LlmParams``, defaults for Llama-3.1-8B on one H100, with sources);
- :mod:`simulator.engine.llm`: a vLLM-like continuous-batching engine
  (``LlmEngine``), stepped one step at a time;
- :mod:`simulator.engine.kv_cache`: an engine's KV cache (``KvCache``, the
  slots held and the prefix cache, :mod:`simulator.engine.prefix_cache`,
  with vLLM's KV-cache events);
- :mod:`simulator.engine.jump`: the same schedule, jumping from one batch
  change to the next (``JumpEngine``, what ``tidal simulate`` steps
  replicas with, over its batch, :mod:`simulator.engine.jump_batch`), and
  ``StepEngine``, ``LlmEngine`` behind the same interface, the reference it
  is checked against;
- :mod:`simulator.engine.arrivals`: ``simulate``, which runs a list of
  arrivals through one engine on a simulated clock;
- :mod:`simulator.engine.batching`: a Triton-like dynamic batcher;
- :mod:`simulator.engine.utilization`: GPU utilization from busy time.

Nothing here reads a clock, sleeps or does I/O: the fake model servers of the
sandbox drive these models in real time, and the policy simulator can drive the
same models in simulated time.
"""

from simulator.engine.arrivals import Arrival, RequestRecord, simulate
from simulator.engine.batching import BatcherParams, BatchOutcome, BatchPlan, DynamicBatcher
from simulator.engine.llm import LlmEngine, StepOutcome, StepPlan
from simulator.engine.params import LlmParams
from simulator.engine.prefix_cache import KvEventRecorder
from simulator.engine.utilization import UtilizationMeter

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
