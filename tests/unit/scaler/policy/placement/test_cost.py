"""GPU-seconds, dollars and savings by capacity type (:mod:`scaler.policy.placement.cost`).

Covers: GPUs from the pod spec (requests, limits, several containers, bad
values); which pods hold GPUs (bound, not finished); the rate by capacity
type and GPU model with the ``*`` fallback, and the saving against all
on-demand; the meter stepped over simulated seconds; the default table's
spot discount; bad price tables and negative time.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.policy.placement.availability import CapacityType, PodFacts
from scaler.policy.placement.cost import (
    DEFAULT_PRICES,
    CostMeter,
    PriceTable,
    cost_rate,
    gpus_requested,
)

SPOT, OD = CapacityType.SPOT, CapacityType.ON_DEMAND
PRICES = PriceTable(
    per_gpu_hour={
        OD: {"*": 4.0, "NVIDIA-H100-80GB-HBM3": 10.0},
        SPOT: {"*": 1.0, "NVIDIA-H100-80GB-HBM3": 3.0},
    }
)
POD = PodFacts(name="p", capacity_type=SPOT, phase="Running", node="n1", gpus=1)


@pytest.mark.parametrize(
    ("spec", "gpus"),
    [
        pytest.param(
            {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}, 2, id="limits"
        ),
        pytest.param(
            {
                "containers": [
                    {
                        "resources": {
                            "requests": {"nvidia.com/gpu": 1},
                            "limits": {"nvidia.com/gpu": 1},
                        }
                    }
                ]
            },
            1,
            id="requests",
        ),
        pytest.param(
            {
                "containers": [
                    {"resources": {"limits": {"nvidia.com/gpu": "1"}}},
                    {"resources": {"limits": {"nvidia.com/gpu": "4"}}},
                ]
            },
            5,
            id="two containers",
        ),
        pytest.param({"containers": [{"resources": {"limits": {"cpu": "2"}}}]}, 0, id="no gpu"),
        pytest.param(
            {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]}, 0, id="bad"
        ),
    ],
)
def test_gpus_requested(spec: dict[str, object], gpus: int) -> None:
    assert gpus_requested(spec) == gpus


def test_rate_and_saving() -> None:
    pods = [
        replace(POD, name="s1"),
        replace(POD, name="s2", gpus=2, gpu_model="NVIDIA-H100-80GB-HBM3"),
        replace(POD, name="od", capacity_type=OD, gpus=1),
        replace(POD, name="pending", node=None),  # not bound: holds nothing
        replace(POD, name="done", phase="Succeeded"),
    ]
    rate = cost_rate(pods, PRICES)
    assert rate.per_hour == {SPOT: 1.0 + 2 * 3.0, OD: 4.0}
    assert rate.total_per_hour == 11.0
    assert rate.on_demand_equivalent_per_hour == 4.0 + 2 * 10.0 + 4.0
    assert rate.saving_per_hour == 28.0 - 11.0


def test_meter_steps() -> None:
    meter = CostMeter()
    pods = [POD, replace(POD, name="od", capacity_type=OD, gpus=2)]
    meter = meter.advance(pods, seconds=1800.0, prices=PRICES)
    meter = meter.advance(pods[:1], seconds=1800.0, prices=PRICES)
    assert meter.gpu_seconds == {SPOT: 3600.0, OD: 3600.0}
    assert meter.dollars == {SPOT: pytest.approx(1.0), OD: pytest.approx(4.0)}
    assert meter.on_demand_equivalent_dollars == pytest.approx(8.0)
    assert meter.saved_dollars == pytest.approx(3.0)


def test_default_prices_discount_spot() -> None:
    for model in ("NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4", "unknown"):
        od = DEFAULT_PRICES.price(OD, model)
        assert DEFAULT_PRICES.price(SPOT, model) == pytest.approx(od * 0.3, rel=1e-3)
    assert DEFAULT_PRICES.price(OD, None) == DEFAULT_PRICES.price(OD, "NVIDIA-A100-SXM4-40GB")


@pytest.mark.parametrize(
    ("table", "match"),
    [
        pytest.param({OD: {"*": 1.0}}, "prices for spot need a '\\*' entry", id="missing spot"),
        pytest.param({OD: {"x": 1.0}, SPOT: {"*": 1.0}}, "on-demand need a", id="no fallback"),
        pytest.param({OD: {"*": -1.0}, SPOT: {"*": 1.0}}, "must be >= 0", id="negative"),
    ],
)
def test_bad_prices(table: dict[CapacityType, dict[str, float]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PriceTable(per_gpu_hour=table)


def test_negative_time() -> None:
    with pytest.raises(ValueError, match="seconds must be >= 0"):
        CostMeter().advance([POD], seconds=-1.0, prices=PRICES)


def test_the_saving_is_against_all_on_demand_for_the_replicas_wanted() -> None:
    # Cover: two on-demand replicas ready, the spot one they stand in for still
    # starting (bound, so billed). Two are wanted, not three.
    od = replace(POD, name="od", capacity_type=OD, gpus=1)
    pods = [od, replace(od, name="od2"), replace(POD, name="spot-starting")]
    rate = cost_rate(pods, PRICES, wanted=2)
    assert rate.total_per_hour == 4.0 + 4.0 + 1.0
    assert rate.on_demand_equivalent_per_hour == 2 * 4.0
    assert rate.saving_per_hour == -1.0  # the cover costs more than all on demand
    assert cost_rate(pods, PRICES).on_demand_equivalent_per_hour == 3 * 4.0  # wanted unknown
    meter = CostMeter().advance(pods, seconds=3600.0, prices=PRICES, wanted=2)
    assert meter.on_demand_equivalent_dollars == pytest.approx(8.0)
    assert meter.saved_dollars == pytest.approx(-1.0)
