"""Which devices pods hold, counted whole (scaler.policy.placement.devices).

Covers: GPU feature discovery's labels give a node's devices and replicas per
resource (MIG profiles too); pods asking for an unshared resource hold a
device per unit; time-sliced replicas spread over the node's devices, one
pod after another, so three pods on a one-GPU node hold one device and on a
two-GPU node two; DCGM's placement wins over the spread; the shares add up to
the devices held; a device's use is its pods' busiest; the renamed
``nvidia.com/gpu.shared`` resource reads the GPU's labels.
"""

from __future__ import annotations

import pytest

from scaler.policy.placement.devices import DevicePod, NodeDevices, bill_devices, node_devices
from scaler.policy.warm_tier import GpuUse, PodUse

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-3g.40gb"


def labels(count: int, replicas: int) -> dict[str, str]:
    return {f"{GPU}.count": str(count), f"{GPU}.replicas": str(replicas)}


def pod(key: str, use: PodUse = PodUse.AWAKE, **kw: object) -> DevicePod:
    base: dict[str, object] = {"node": "n", "resource": GPU, "units": 1}
    base.update(kw)
    return DevicePod(key=key, use=use, **base)  # type: ignore[arg-type]


def test_the_labels_give_devices_and_replicas_per_resource() -> None:
    mig = {f"{MIG}.count": "2", f"{MIG}.replicas": "1", f"{MIG}.memory": "40192"}
    devices = node_devices({**labels(1, 4), **mig, "other": "x"})
    assert devices.count == {GPU: 1, MIG: 2}
    assert devices.replicas == {GPU: 4, MIG: 1}
    assert node_devices({}) == NodeDevices({}, {})


@pytest.mark.parametrize(("gpus", "held"), [(1, 1), (2, 2), (8, 3)])
def test_time_sliced_replicas_spread_over_the_nodes_gpus(gpus: int, held: int) -> None:
    nodes = {"n": node_devices(labels(gpus, 4))}
    bill = bill_devices([pod("a"), pod("b"), pod("c")], nodes)
    assert len(bill.uses) == held
    assert sum(bill.shares.values()) == pytest.approx(held)


def test_unshared_units_each_hold_a_device() -> None:
    nodes = {"n": node_devices(labels(8, 1))}
    bill = bill_devices([pod("a", units=2), pod("b", resource=MIG)], nodes)
    assert len(bill.uses) == 3
    assert bill.shares == {"a": 2.0, "b": 1.0}


def test_dcgm_placement_wins_over_the_spread() -> None:
    nodes = {"n": node_devices(labels(2, 4))}
    pods = [pod(k, devices=("GPU-0",)) for k in ("a", "b", "c")]
    bill = bill_devices(pods, nodes)
    assert list(bill.uses) == ["GPU-0"]
    assert bill.shares["a"] == pytest.approx(1 / 3)


def test_a_device_does_what_its_busiest_pod_does() -> None:
    nodes = {"n": node_devices(labels(1, 4))}
    asleep = bill_devices([pod("a", PodUse.ASLEEP), pod("b", PodUse.ASLEEP)], nodes)
    assert asleep.count(GpuUse.SLEEPING_ONLY) == 1
    mixed = bill_devices([pod("a", PodUse.ASLEEP), pod("b", PodUse.STARTING)], nodes)
    assert mixed.count(GpuUse.STARTING) == 1
    assert mixed.seconds(10.0).starting == 10.0


def test_sleepers_keep_nothing_paid_beside_a_serving_pod_and_their_share_alone() -> None:
    nodes = {"n": node_devices(labels(1, 4)), "m": node_devices(labels(1, 4))}
    bill = bill_devices(
        [pod("a", PodUse.ASLEEP), pod("b"), pod("c", PodUse.ASLEEP, node="m"),
         pod("d", PodUse.ASLEEP, node="m")],
        nodes,
    )  # fmt: skip
    assert bill.sleeper_share(["a"]) == 0.0
    assert bill.sleeper_share(["c"]) == 0.5
    assert bill.sleeper_share(["zz"]) is None


def test_renamed_replicas_read_the_gpus_labels() -> None:
    nodes = {"n": node_devices(labels(1, 4))}
    bill = bill_devices(
        [pod("a", resource=GPU + ".shared"), pod("b", resource=GPU + ".shared")], nodes
    )
    assert len(bill.uses) == 1
