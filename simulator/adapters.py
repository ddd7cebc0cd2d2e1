"""Many LoRA adapters on one base model, simulated: three ways to serve them, scored.

``tidal simulate --adapters 100`` (:mod:`simulator.adapter_cli`) draws a
workload of requests for that many adapters of one base model and serves it
three ways, each scaled by the
same reactive rule (:mod:`simulator.adapter_fleet`), so that only the
handling of adapters differs:

- **per-adapter**: one Deployment per adapter (its weights merged or its
  adapter loaded at start), each scaled on its own demand and to zero after
  the grace period, as Tidal scales any model;
- **pinned**: one fleet of base-model replicas with every adapter loaded at
  start (vLLM's ``--lora-modules``, host memory for all), routed least-loaded
  as for any model; a replica runs at most ``--max-loras`` distinct adapters
  in a batch, and a request for another waits inside the server (vLLM's
  scheduler skips it until a slot frees);
- **tidal**: one fleet, adapters loaded on demand while the request is held
  and unloaded when idle past the keep-alive, routed by
  :mod:`activator.balancing.adapter_affinity` (the activator's own code),
  the fleet scaled on the adapters' summed demand and on their slots.

**Popularity**: adapter ``k`` (1-based rank) is asked for with probability
proportional to ``k ** -s`` (Zipf). LoRA-serving papers evaluate skewed
popularity drawn from a power law (S-LoRA; Punica's "skewed" workload);
``s = 1`` by default, a flag. Arrivals are Poisson at ``--adapter-rate``.
**Requests**: ShareGPT's mean 179 output tokens (exponential) and 202 prompt
tokens (vLLM's v0.6.0 blog), on the engine model's Llama-3.1-8B/H100 step
times at the replica's batch (:mod:`simulator.engine.params`).

Scored after a warm-up (the fleets start at their steady size, the first
minutes are not scored): **attainment**, the share of requests whose time
to first token (hold, adapter load, wait inside the server, prefill) is
within the objective; **GPU-hours**, every replica from creation (its cold
start included) to removal.

Not modelled: LoRA's own decode overhead (a few percent in Punica and
S-LoRA; per-adapter merged weights pay none), host memory for pinned
adapters, several activators.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from simulator.engine import LlmParams

__all__ = [
    "MODES",
    "AdapterRequest",
    "AdapterWorkload",
    "FleetParams",
    "ModeResult",
    "generate",
]

MODES = ("per-adapter", "pinned", "tidal")
SHAREGPT_PROMPT_TOKENS = 202
SHAREGPT_OUTPUT_TOKENS = 179


@dataclass(frozen=True, slots=True)
class AdapterWorkload:
    adapters: int = 100
    zipf_s: float = 1.0
    rate_per_s: float = 20.0
    duration_s: float = 3600.0
    seed: int = 1

    def __post_init__(self) -> None:
        if self.adapters < 1:
            raise ValueError(f"adapters must be >= 1; got {self.adapters}")
        if not (math.isfinite(self.zipf_s) and self.zipf_s >= 0):
            raise ValueError(f"the Zipf exponent must be >= 0; got {self.zipf_s}")
        if not self.rate_per_s > 0:
            raise ValueError(f"the request rate must be > 0 per second; got {self.rate_per_s}")
        if not self.duration_s > 0:
            raise ValueError(f"the duration must be > 0 s; got {self.duration_s}")

    def shares(self) -> list[float]:
        """Each adapter's share of requests, most popular first."""
        weights = [k**-self.zipf_s for k in range(1, self.adapters + 1)]
        total = sum(weights)
        return [w / total for w in weights]


@dataclass(frozen=True, slots=True)
class FleetParams:
    """The replicas and the scaling rule shared by every mode."""

    batch: int = 32  # requests one replica runs at once (the activator's limit)
    target_concurrency: float = 16.0
    max_loras: int = 8
    load_s: float = 1.0
    keep_alive_s: float = 600.0
    cold_start_s: float = 60.0
    grace_s: float = 300.0
    scale_down_delay_s: float = 60.0
    slo_ttft_s: float = 2.0
    warmup_s: float = 600.0

    def __post_init__(self) -> None:
        for name in ("batch", "max_loras"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}")
        if not 0 < self.target_concurrency <= self.batch:
            raise ValueError(
                f"target concurrency must be > 0 and at most the batch ({self.batch}); "
                f"got {self.target_concurrency}"
            )
        for name in ("load_s", "keep_alive_s", "cold_start_s", "grace_s", "warmup_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0; got {getattr(self, name)}")


@dataclass(frozen=True, slots=True)
class AdapterRequest:
    arrival_s: float
    adapter: str
    prefill_s: float
    service_s: float  # from the first token to the last


def generate(workload: AdapterWorkload, fleet: FleetParams) -> list[AdapterRequest]:
    """The requests, in arrival order (seeded: the same workload gives the same list)."""
    rng = random.Random(workload.seed)
    names = [f"adapter-{k:03d}" for k in range(1, workload.adapters + 1)]
    cum: list[float] = []
    acc = 0.0
    for share in workload.shares():
        acc += share
        cum.append(acc)
    engine = LlmParams()
    step_s = engine.step_base_s + engine.step_per_seq_s * fleet.batch
    prefill_s = SHAREGPT_PROMPT_TOKENS / engine.prefill_tokens_per_s + step_s
    out: list[AdapterRequest] = []
    t = 0.0
    while True:
        t += rng.expovariate(workload.rate_per_s)
        if t >= workload.duration_s:
            return out
        (adapter,) = rng.choices(names, cum_weights=cum)
        tokens = max(1, round(rng.expovariate(1.0 / SHAREGPT_OUTPUT_TOKENS)))
        out.append(AdapterRequest(t, adapter, prefill_s, tokens * step_s))


@dataclass(frozen=True, slots=True)
class ModeResult:
    mode: str
    requests: int  # scored (after the warm-up)
    attainment: float
    gpu_hours: float
    ttft_p99_s: float
    loads: int
    unloads: int
    peak_replicas: int  # after the warm-up
