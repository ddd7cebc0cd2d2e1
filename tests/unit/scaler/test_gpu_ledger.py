"""The GPU ledger (scaler.gpu_ledger): one account of GPU-seconds and dollars.

Covers: every pod bound to a node counts its own GPU request under its
node's capacity type, Ready or not (a loading replica's GPU is billed), and
an unbound pod counts nothing; the first call adds nothing; the totals by
capacity type equal the per-target series (GPU-seconds and dollars), the
cost view of ``/v1/targets`` and ``tidal status`` shows the same figures,
and spot saves against the all-on-demand equivalent, for the replicas
wanted when known (cover for a loading spot replica is not wanted twice);
the device-seconds are split by use (serving, starting, sleeping-only);
pods sharing a time-sliced GPU count it once, split among them, across
targets, and a GPU of sleepers alone is sleeping-only; DCGM's placements
tell shared GPUs apart where the labels alone cannot; one price table
prices both the totals and the per-target dollars; a target that leaves
is forgotten, and the metrics' forget removes its series.
"""

from __future__ import annotations

import copy

import pytest
from prometheus_client import CollectorRegistry

from scaler.gpu_ledger import GpuLedger
from scaler.kube.objects import deployment_from_raw
from scaler.kube.types import NodeInfo, PodInfo, TargetSnapshot
from scaler.metrics import Metrics
from scaler.placement.placer import Placer
from scaler.policy.placement.availability import CapacityType
from scaler.policy.placement.cost import ANY_MODEL, DEFAULT_PRICES, PriceTable
from scaler.policy.warm_tier import PodUse
from tests.unit.scaler.placement.test_placer import KARPENTER, RAW, View, pod

KEY = "ml/llama"


def snapshots(*pods: PodInfo, ready: int, key: str = KEY) -> dict[str, TargetSnapshot]:
    raw = copy.deepcopy(RAW)
    raw["status"] = {"readyReplicas": ready}
    raw["metadata"]["name"] = key.split("/")[1]
    return {key: TargetSnapshot(deployment_from_raw(raw), pods)}


def ledger(
    metrics: Metrics, prices: PriceTable = DEFAULT_PRICES, view: View | None = None
) -> GpuLedger:
    view = view or View()
    placer = Placer(view=view, preset=KARPENTER)
    return GpuLedger(prices=prices, metrics=metrics, facts=placer.facts, nodes=view.nodes)


def sliced_view(gpus: int) -> View:
    """od-1 with ``gpus`` GPUs, each advertised as 4 time-sliced replicas."""
    view = View()
    labels = {**view.node_map["od-1"].labels, "nvidia.com/gpu.count": str(gpus)}
    labels["nvidia.com/gpu.replicas"] = "4"
    view.node_map["od-1"] = NodeInfo("od-1", labels)
    return view


def test_bound_pods_count_ready_or_not_and_every_figure_agrees() -> None:
    metrics = Metrics(CollectorRegistry())
    book = ledger(metrics)
    snaps = snapshots(
        pod("s0", "spot-1"),
        pod("o0", "od-1", gpus=2),
        pod("o1", "od-1", ready=False),  # loading: its GPU is held and billed
        pod("p0", None, ready=False, phase="Pending"),  # not bound: no GPU yet
        ready=2,
    )
    asleep = {"ml/s0": PodUse.ASLEEP}.get
    assert book.account(10.0, snaps, asleep) == 0.0  # no interval yet
    assert book.account(3610.0, snaps, asleep) == 4 * 3600.0

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert sample("tidal_scaler_gpu_seconds_total", capacity_type="spot") == 3600.0
    assert sample("tidal_scaler_gpu_seconds_total", capacity_type="on-demand") == 3 * 3600.0
    for capacity in ("spot", "on-demand"):
        assert sample("tidal_scaler_gpu_seconds_total", capacity_type=capacity) == sample(
            "tidal_scaler_target_gpu_seconds_total", target=KEY, capacity_type=capacity
        )
        assert sample("tidal_scaler_gpu_cost_total", capacity_type=capacity) == sample(
            "tidal_scaler_cost_dollars_total", target=KEY, capacity_type=capacity
        )
    # No GPU is shared here: s0's asleep alone on its own (sleeping-only), o0's two
    # serve, o1's loads (starting).
    assert sample("tidal_scaler_gpu_seconds_by_state_total", state="sleeping-only") == 3600.0
    assert sample("tidal_scaler_gpu_seconds_by_state_total", state="serving") == 2 * 3600.0
    assert sample("tidal_scaler_gpu_seconds_by_state_total", state="starting") == 3600.0
    assert book.devices().as_json()["held"] == 4

    cost = book.cost(KEY)
    assert cost is not None
    assert cost.as_json()["gpu_seconds"] == {"on-demand": 3 * 3600.0, "spot": 3600.0}
    spot = DEFAULT_PRICES.price(CapacityType.SPOT, None)
    h100 = DEFAULT_PRICES.price(CapacityType.ON_DEMAND, "NVIDIA-H100-80GB-HBM3")
    assert cost.rate.total_per_hour == spot + 3 * h100
    assert sample("tidal_scaler_cost_dollars_total", target=KEY, capacity_type="spot") == spot
    assert cost.rate.saving_per_hour > 0 and cost.meter.saved_dollars > 0
    assert sample("tidal_scaler_savings_dollars_per_hour", target=KEY) == (
        cost.rate.saving_per_hour
    )


def test_one_price_table_prices_the_totals_and_the_targets() -> None:
    metrics = Metrics(CollectorRegistry())
    flat = PriceTable(
        per_gpu_hour={CapacityType.ON_DEMAND: {ANY_MODEL: 4.0}, CapacityType.SPOT: {ANY_MODEL: 1.0}}
    )
    book = ledger(metrics, flat)
    snaps = snapshots(pod("s0", "spot-1"), pod("o0", "od-1"), ready=2)
    book.account(0.0, snaps)
    book.account(1800.0, snaps)
    get = metrics.registry.get_sample_value
    assert get("tidal_scaler_gpu_cost_total", {"capacity_type": "on-demand"}) == 2.0
    assert get("tidal_scaler_gpu_cost_total", {"capacity_type": "spot"}) == 0.5
    cost = book.cost(KEY)
    assert cost is not None and cost.as_json()["dollars"] == 2.5


def test_a_target_that_leaves_is_forgotten() -> None:
    metrics = Metrics(CollectorRegistry())
    book = ledger(metrics)
    snaps = snapshots(pod("s0", "spot-1"), ready=1)
    book.account(0.0, snaps)
    book.account(10.0, snaps)
    assert book.cost(KEY) is not None
    book.account(20.0, {})
    assert book.cost(KEY) is None
    metrics.forget_target(KEY)  # what the controller does when the target goes
    labels = {"target": KEY, "capacity_type": "spot"}
    assert (
        metrics.registry.get_sample_value("tidal_scaler_target_gpu_seconds_total", labels) is None
    )
    assert metrics.registry.get_sample_value("tidal_scaler_cost_dollars_per_hour", labels) is None
    # The totals keep what was counted.
    total = {"capacity_type": "spot"}
    assert metrics.registry.get_sample_value("tidal_scaler_gpu_seconds_total", total) == 10.0


def test_the_saving_is_against_the_replicas_wanted() -> None:
    # Two on-demand replicas cover a spot one that is still loading: two are wanted.
    flat = PriceTable(
        per_gpu_hour={CapacityType.ON_DEMAND: {ANY_MODEL: 4.0}, CapacityType.SPOT: {ANY_MODEL: 1.0}}
    )
    book = ledger(Metrics(CollectorRegistry()), flat)
    snaps = snapshots(
        pod("o0", "od-1"), pod("o1", "od-1"), pod("s0", "spot-1", ready=False), ready=2
    )
    book.account(0.0, snaps, wanted=lambda _: 2)
    book.account(3600.0, snaps, wanted=lambda _: 2)
    cost = book.cost(KEY)
    assert cost is not None
    assert cost.rate.total_per_hour == 9.0
    assert cost.rate.on_demand_equivalent_per_hour == 8.0
    assert cost.as_json()["saving_dollars_per_hour"] == -1.0
    assert cost.as_json()["saved_dollars"] == -1.0


def test_pods_sharing_a_time_sliced_gpu_count_it_once_across_targets() -> None:
    metrics = Metrics(CollectorRegistry())
    book = ledger(metrics, view=sliced_view(gpus=1))
    one = snapshots(pod("a0", "od-1"), ready=1)
    two = snapshots(pod("b0", "od-1"), pod("b1", "od-1"), ready=2, key="ml/other")
    snaps = {**one, **two}
    book.account(0.0, snaps)
    assert book.account(3600.0, snaps) == 3600.0  # one GPU held, three pods on it
    get = metrics.registry.get_sample_value
    assert get("tidal_scaler_gpu_seconds_total", {"capacity_type": "on-demand"}) == 3600.0
    mine = book.cost(KEY)
    theirs = book.cost("ml/other")
    assert mine is not None and theirs is not None
    assert mine.as_json()["gpu_seconds"]["on-demand"] == 1200.0
    assert theirs.as_json()["gpu_seconds"]["on-demand"] == 2400.0
    h100 = DEFAULT_PRICES.price(CapacityType.ON_DEMAND, "NVIDIA-H100-80GB-HBM3")
    total = mine.rate.total_per_hour + theirs.rate.total_per_hour
    assert abs(total - h100) < 1e-9


def test_a_gpu_of_sleepers_alone_is_sleeping_only_and_one_awake_pod_makes_it_serve() -> None:
    metrics = Metrics(CollectorRegistry())
    book = ledger(metrics, view=sliced_view(gpus=1))
    snaps = snapshots(pod("a0", "od-1"), pod("a1", "od-1"), ready=2)
    all_asleep = {"ml/a0": PodUse.ASLEEP, "ml/a1": PodUse.ASLEEP}.get
    book.account(0.0, snaps, all_asleep)
    book.account(600.0, snaps, all_asleep)
    assert book.devices().as_json()["sleeping_only"] == 1
    book.account(1200.0, snaps, {"ml/a0": PodUse.ASLEEP}.get)
    seen = book.devices().as_json()
    assert (seen["held"], seen["serving"], seen["sleeping_only"]) == (1, 1, 0)
    assert seen["gpu_seconds"] == {"serving": 600.0, "starting": 0.0, "sleeping_only": 600.0}


def test_dcgm_placements_tell_shared_gpus_apart() -> None:
    # Two GPUs on the node, three pods: the labels alone spread them over both;
    # DCGM says all three are on one, so one GPU is held.
    book = ledger(Metrics(CollectorRegistry()), view=sliced_view(gpus=2))
    snaps = snapshots(pod("a0", "od-1"), pod("a1", "od-1"), pod("a2", "od-1"), ready=3)
    book.account(0.0, snaps)
    assert book.account(100.0, snaps) == 200.0
    placed = {("ml", name): "GPU-1" for name in ("a0", "a1", "a2")}
    assert book.account(200.0, snaps, placements=placed) == pytest.approx(100.0)
