"""Time-sliced GPUs: node labels and capacity, and which GPU a pod's slice gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.sandbox.cluster.gpu_slices import SliceBook, requested_gpus
from loadtests.sandbox.cluster.nodes import NodeSpec, node_object, parse_nodes


def _node(replicas: int, gpus: int = 2) -> dict[str, object]:
    spec = NodeSpec("n1", "on-demand", "us-east-1a", gpus=gpus, gpu_replicas=replicas)
    return node_object(spec, address="127.0.0.2")


def test_a_time_sliced_node_advertises_gpus_times_replicas() -> None:
    node = _node(4)
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"  # type: ignore[index]
    labels = node["metadata"]["labels"]  # type: ignore[index]
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.memory"] == "40960"
    plain = _node(1)
    assert plain["status"]["capacity"]["nvidia.com/gpu"] == "2"  # type: ignore[index]
    assert "nvidia.com/gpu.replicas" not in plain["metadata"]["labels"]  # type: ignore[index]


def test_pods_spread_over_the_physical_gpus_and_keep_theirs(tmp_path: Path) -> None:
    book = SliceBook(tmp_path)
    node = _node(3)
    got = [book.assign(uid=f"p{i}", node=node) for i in range(4)]  # type: ignore[arg-type]
    assert [g.index for g in got if g] == [0, 1, 0, 1]
    assert (
        got[0] and got[2] and got[0].uuid == got[2].uuid and got[0].ledger_dir == got[2].ledger_dir
    )
    assert got[0] and got[1] and got[0].uuid != got[1].uuid
    again = book.assign(uid="p1", node=node)  # type: ignore[arg-type]
    assert again is not None and again.index == 1  # a restart keeps its GPU
    book.release("p0")
    book.release("p2")
    fifth = book.assign(uid="p4", node=node)  # type: ignore[arg-type]
    assert fifth is not None and fifth.index == 0
    assert fifth.server_args()[-1] == "40960"
    assert fifth.env()["NVIDIA_VISIBLE_DEVICES"] == fifth.uuid


def test_an_unshared_node_needs_no_slice(tmp_path: Path) -> None:
    assert SliceBook(tmp_path).assign(uid="p", node=_node(1)) is None  # type: ignore[arg-type]


def test_requested_gpus_reads_limits_then_requests() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"limits": {"nvidia.com/gpu": "1"}}},
                {"resources": {"requests": {"nvidia.com/gpu": 2}}},
                {},
            ]
        }
    }
    assert requested_gpus(pod) == 3


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"gpuReplicas": 0}, "gpuReplicas 0 must be an integer 1..64"),
        ({"gpuReplicas": "4"}, "gpuReplicas '4' must be an integer 1..64"),
        ({"gpuMemoryMiB": 0}, "gpuMemoryMiB 0 must be an integer >= 1"),
    ],
)
def test_nodes_file_checks_the_sharing_keys(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_nodes([{"name": "a", **entry}])


def test_nodes_file_reads_the_sharing_keys() -> None:
    (spec,) = parse_nodes([{"name": "a", "gpus": 1, "gpuReplicas": 3, "gpuMemoryMiB": 49152}])
    assert (spec.gpu_replicas, spec.gpu_memory_mib) == (3, 49152)
