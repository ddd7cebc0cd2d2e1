"""LoRA adapters in the simulator (simulator.adapters, simulator.adapter_fleet).

Covers: Zipf popularity and the seeded workload; on a tiny fleet, Tidal
loads an adapter once and then sends its requests where it is loaded, while
pinned adapters wait inside the server for a batch slot; idle adapters are
unloaded past the keep-alive; the headline: with 100 adapters, on-demand
loading meets the objective for 99 % of requests on at most 0.2x the
GPU-hours of one Deployment per adapter; bad parameters are refused.
"""

from __future__ import annotations

import pytest

from simulator.adapter_fleet import simulate
from simulator.adapters import AdapterRequest, AdapterWorkload, FleetParams, generate


def test_zipf_shares_and_a_seeded_workload() -> None:
    workload = AdapterWorkload(adapters=100, zipf_s=1.0, rate_per_s=10.0, duration_s=600.0)
    shares = workload.shares()
    assert sum(shares) == pytest.approx(1.0)
    assert shares[0] == pytest.approx(1 / sum(1 / k for k in range(1, 101)))  # 19.3 %
    assert shares[0] / shares[9] == pytest.approx(10.0)
    requests = generate(workload, FleetParams())
    assert requests == generate(workload, FleetParams())
    assert 5400 < len(requests) < 6600  # 10/s for 600 s
    top = sum(1 for r in requests if r.adapter == "adapter-001") / len(requests)
    assert top == pytest.approx(shares[0], abs=0.02)


def _tiny(**kw: float) -> FleetParams:
    base: dict[str, float] = {
        "batch": 4,
        "target_concurrency": 4,
        "max_loras": 1,
        "load_s": 1.0,
        "warmup_s": 0.0,
        "grace_s": 1000.0,
        "keep_alive_s": 1000.0,
    }
    return FleetParams(**{**base, **kw})  # type: ignore[arg-type]


def _req(t: float, adapter: str) -> AdapterRequest:
    return AdapterRequest(arrival_s=t, adapter=adapter, prefill_s=0.0, service_s=5.0)


def test_tidal_loads_once_and_pinned_waits_for_a_batch_slot() -> None:
    # Two adapters, one slot each replica, one replica: a then b while a runs.
    requests = [_req(0.0, "a"), _req(1.0, "a"), _req(2.0, "b"), _req(30.0, "a")]
    tidal = simulate(requests, _tiny(), "tidal")
    # a: loaded once (1 s), the second a goes where it is loaded; b holds for a
    # slot (both a's running until 6 s), then evicts a and loads; a at 30 s again.
    assert tidal.loads == 3 and tidal.unloads == 2
    pinned = simulate(requests, _tiny(), "pinned")
    assert pinned.loads == 0
    # b waited inside the server until both a's finished (6 s): 4 s over a 2 s objective.
    assert pinned.attainment == pytest.approx(3 / 4)
    assert pinned.ttft_p99_s == pytest.approx(4.0)


def test_idle_adapters_are_unloaded_past_the_keep_alive() -> None:
    requests = [_req(0.0, "a"), _req(100.0, "b")]
    result = simulate(requests, _tiny(max_loras=2, keep_alive_s=30.0), "tidal")
    assert (result.loads, result.unloads) == (2, 1)  # a, idle from 5 s, unloaded by 100 s


def test_on_demand_loading_meets_the_objective_on_a_fifth_of_the_gpus() -> None:
    workload = AdapterWorkload(adapters=100, rate_per_s=20.0, duration_s=600.0)
    fleet = FleetParams(warmup_s=240.0)
    requests = generate(workload, fleet)
    per_adapter = simulate(requests, fleet, "per-adapter")
    tidal = simulate(requests, fleet, "tidal")
    assert tidal.attainment >= 0.99
    assert tidal.gpu_hours <= 0.2 * per_adapter.gpu_hours
    assert tidal.loads > 0 and tidal.peak_replicas < 100


def test_bad_parameters_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="Zipf exponent must be >= 0"):
        AdapterWorkload(zipf_s=-1.0)
    with pytest.raises(ValueError, match="target concurrency must be > 0 and at most the batch"):
        FleetParams(batch=8, target_concurrency=16.0)
    with pytest.raises(ValueError, match="mode must be per-adapter, pinned or tidal"):
        simulate([], FleetParams(), "merged")
