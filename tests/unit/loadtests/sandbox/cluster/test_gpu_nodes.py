"""Modelled GPU nodes: GPU feature discovery's labels, MIG resources, the nodes file, the pools.

Covers: a whole-GPU node's labels and ``nvidia.com/gpu`` capacity and its
instance's cpu and host memory; a MIG node under the mixed strategy
(``nvidia.com/gpu: 0``, one resource per profile counting every GPU's
devices, the per-profile labels, ``mig.config`` and its state); a custom
layout; a node without ``gpu`` keeps today's labels; the nodes file's
``gpu``/``mig`` keys, valid and invalid; ``gpu-mix`` holds the cluster its
docstring draws, and ``--nodes`` takes a pool's name unless a file has it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadtests.sandbox.cluster.node_pools import GPU_MIX_POOL, resolve_nodes
from loadtests.sandbox.cluster.nodes import DEFAULT_POOL, NodeSpec, node_object, parse_nodes

Obj = dict[str, Any]


def node(**entry: Any) -> Obj:
    (spec,) = parse_nodes([{"name": "n", **entry}])
    return node_object(spec, address="127.0.0.2")


def test_a_whole_gpu_node_looks_like_gfd_labels_it() -> None:
    got = node(gpu="H100-80GB")
    labels, capacity = got["metadata"]["labels"], got["status"]["capacity"]
    assert {k: labels[k] for k in labels if k.startswith("nvidia.com/")} == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-disabled",
        "nvidia.com/mig.config.state": "success",
    }
    assert labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert (capacity["nvidia.com/gpu"], capacity["cpu"], capacity["memory"]) == ("8", "192", "2Ti")
    assert got["status"]["allocatable"] == capacity


def test_a_mig_node_advertises_each_profile_and_no_whole_gpu() -> None:
    got = node(gpu="A100-80GB", gpus=4, mig="all-balanced")
    labels, capacity = got["metadata"]["labels"], got["status"]["capacity"]
    mig = {k: v for k, v in capacity.items() if k.startswith("nvidia.com/")}
    assert mig == {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.10gb": "8",
        "nvidia.com/mig-2g.20gb": "4",
        "nvidia.com/mig-3g.40gb": "4",
    }
    assert labels["nvidia.com/mig.config"] == "all-balanced"
    assert labels["nvidia.com/gpu.count"] == "4"  # the physical GPUs, as GFD counts them
    assert {k: v for k, v in labels.items() if k.startswith("nvidia.com/mig-3g.40gb.")} == {
        "nvidia.com/mig-3g.40gb.count": "4",
        "nvidia.com/mig-3g.40gb.memory": "40192",
        "nvidia.com/mig-3g.40gb.multiprocessors": "42",
        "nvidia.com/mig-3g.40gb.slices.gi": "3",
        "nvidia.com/mig-3g.40gb.slices.ci": "3",
        "nvidia.com/mig-3g.40gb.product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb",
        "nvidia.com/mig-3g.40gb.replicas": "1",
        "nvidia.com/mig-3g.40gb.sharing-strategy": "none",
    }


def test_a_custom_layout_is_named_custom() -> None:
    got = node(gpu="H100-80GB", gpus=2, mig={"4g.40gb": 1, "3g.40gb": 1})
    assert got["metadata"]["labels"]["nvidia.com/mig.config"] == "custom"
    assert got["status"]["capacity"]["nvidia.com/mig-4g.40gb"] == "2"


def test_an_l4_node_has_no_mig() -> None:
    labels = node(gpu="L4", gpus=1)["metadata"]["labels"]
    assert labels["nvidia.com/mig.capable"] == "false"
    assert "nvidia.com/mig.strategy" not in labels and "nvidia.com/mig.config" not in labels


def test_a_node_without_gpu_keeps_todays_labels() -> None:
    labels = node_object(DEFAULT_POOL[0], address="127.0.0.2")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert "nvidia.com/mig.capable" not in labels and "nvidia.com/gpu.family" not in labels


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        pytest.param({"gpu": "B200"}, "gpu 'B200' is not a GPU the sandbox models", id="gpu"),
        pytest.param({"gpu": "L4", "mig": "all-1g.10gb"}, "NVIDIA-L4 has no MIG", id="l4-mig"),
        pytest.param(
            {"gpu": "H100-80GB", "mig": "all-3g.20gb"},
            "not a layout of NVIDIA-H100-80GB-HBM3; the GPU operator's: all-1g.10gb",
            id="layout",
        ),
        pytest.param({"gpu": "H100-80GB", "mig": {"3g.40gb": 3}}, "1 to 2 fit", id="custom-layout"),
        pytest.param({"gpu": "L4", "gpuReplicas": 2}, "drop \\['gpuReplicas'\\]", id="sharing"),
        pytest.param({"mig": "all-balanced"}, "mig needs gpu", id="mig-alone"),
        pytest.param({"gpu": "L4", "gpus": 0}, "gpus 0 must be an integer >= 1", id="no-gpus"),
    ],
)
def test_the_nodes_file_refuses_bad_gpu_keys(entry: Obj, message: str) -> None:
    with pytest.raises(ValueError, match=f"nodes file: nodes\\[0\\]: .*{message}"):
        parse_nodes([{"name": "n", **entry}])


def test_the_nodes_file_keeps_its_overrides_of_the_instance() -> None:
    (spec,) = parse_nodes([{"name": "n", "gpu": "L4", "gpus": 1, "memory": "16Gi", "cpu": "4"}])
    assert (spec.gpus, spec.memory, spec.cpu, spec.instance_type) == (1, "16Gi", "4", "g6.48xlarge")


def _capacity(specs: tuple[NodeSpec, ...]) -> dict[str, int]:
    total: dict[str, int] = {}
    for spec in specs:
        for key, value in node_object(spec, address="127.0.0.2")["status"]["capacity"].items():
            if key.startswith("nvidia.com/"):
                total[key] = total.get(key, 0) + int(value)
    return total


def test_gpu_mix_holds_the_cluster_it_draws() -> None:
    assert [s.name for s in GPU_MIX_POOL] == [
        "h100",
        "h100-spot",
        "h100-mig",
        "a100-mig",
        "l4-1",
        "l4-2",
    ]
    assert _capacity(GPU_MIX_POOL) == {
        "nvidia.com/gpu": 32,  # 8 H100 on demand, 8 on spot, 16 L4
        "nvidia.com/mig-1g.10gb": 16,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-3g.40gb": 24,  # 8 on the H100 node, 16 on the A100 node
    }


def test_nodes_takes_a_pool_name_unless_a_file_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert resolve_nodes(None) == DEFAULT_POOL
    assert resolve_nodes("gpu-mix") == GPU_MIX_POOL
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpu-mix").write_text("nodes: [{name: mine, gpu: L4, gpus: 1}]\n")
    assert [s.name for s in resolve_nodes("gpu-mix")] == ["mine"]
    with pytest.raises(FileNotFoundError):
        resolve_nodes("no-such-pool")
