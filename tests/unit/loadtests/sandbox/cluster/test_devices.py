"""The device book: which devices a fake vLLM is given, and the host-memory ledger of its node.

Covers: a MIG pod gets a free instance of its profile, told as the device
plugin and the driver would tell it (``NVIDIA_VISIBLE_DEVICES=MIG-...``,
``--gpu-shape`` with GFD's device name, the framebuffer); whole GPUs come
as many as asked, their memory summed; a pod keeps its devices across a
restart and gives them back when it ends; a pod bound where its devices
are taken, or asking for two kinds, is refused naming why; every pod of a
known node gets the node's host-memory ledger; a time-sliced node still
hands out slices; a node the book does not know gets nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadtests.sandbox.cluster.devices import DeviceBook, NoFreeDevice
from loadtests.sandbox.cluster.nodes import NodeSpec, node_object, parse_nodes

Obj = dict[str, Any]


def spec_of(**entry: Any) -> NodeSpec:
    (spec,) = parse_nodes([{"name": "n", **entry}])
    return spec


def pod(**limits: str) -> Obj:
    return {"spec": {"containers": [{"name": "vllm", "resources": {"limits": limits}}]}}


def book_with(tmp_path: Path, spec: NodeSpec) -> tuple[DeviceBook, Obj]:
    book = DeviceBook(tmp_path)
    book.add_nodes([spec])
    return book, node_object(spec, address="127.0.0.2")


def flag(args: tuple[str, ...], name: str) -> str:
    return args[args.index(name) + 1]


def test_a_mig_pod_is_told_its_instance(tmp_path: Path) -> None:
    book, node = book_with(tmp_path, spec_of(gpu="H100-80GB", gpus=2, mig="all-3g.40gb"))
    given = book.assign(uid="a", pod=pod(**{"nvidia.com/mig-3g.40gb": "1"}), node=node)
    assert flag(given.args, "--gpu-shape") == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    assert (flag(given.args, "--gpu-count"), flag(given.args, "--gpu-memory-mib")) == ("1", "40448")
    assert given.env["NVIDIA_VISIBLE_DEVICES"].startswith("MIG-")
    assert given.env["TIDAL_SANDBOX_GPU_INDEX"] == "0"


def test_whole_gpus_come_as_many_as_asked(tmp_path: Path) -> None:
    book, node = book_with(tmp_path, spec_of(gpu="L4", gpus=4))
    given = book.assign(uid="a", pod=pod(**{"nvidia.com/gpu": "2"}), node=node)
    uuids = given.env["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(uuids) == 2 and all(u.startswith("GPU-") for u in uuids)
    assert flag(given.args, "--gpu-count") == "2"
    assert flag(given.args, "--gpu-memory-mib") == str(2 * 23_034)


def test_devices_stay_across_restarts_and_come_back_at_the_end(tmp_path: Path) -> None:
    book, node = book_with(tmp_path, spec_of(gpu="A100-80GB", gpus=1, mig="all-3g.40gb"))
    slice_pod = pod(**{"nvidia.com/mig-3g.40gb": "1"})
    first = book.assign(uid="a", pod=slice_pod, node=node)
    again = book.assign(uid="a", pod=slice_pod, node=node)
    assert first.env == again.env
    other = book.assign(uid="b", pod=slice_pod, node=node)
    assert other.env["NVIDIA_VISIBLE_DEVICES"] != first.env["NVIDIA_VISIBLE_DEVICES"]
    with pytest.raises(NoFreeDevice, match=r"node n has 0 free nvidia\.com/mig-3g\.40gb device"):
        book.assign(uid="c", pod=slice_pod, node=node)
    book.release("a")
    third = book.assign(uid="c", pod=slice_pod, node=node)
    assert third.env["NVIDIA_VISIBLE_DEVICES"] == first.env["NVIDIA_VISIBLE_DEVICES"]
    assert set(book.holders("n")) == {"b", "c"}


def test_two_kinds_of_device_are_refused(tmp_path: Path) -> None:
    book, node = book_with(tmp_path, spec_of(gpu="H100-80GB", gpus=1, mig="all-balanced"))
    both = pod(**{"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-2g.20gb": "1"})
    with pytest.raises(NoFreeDevice, match="one kind of GPU device; the pod asks for"):
        book.assign(uid="a", pod=both, node=node)


def test_every_pod_of_a_known_node_shares_its_host_memory_ledger(tmp_path: Path) -> None:
    book, node = book_with(tmp_path, spec_of(gpus=8, memory="64Gi"))
    given = book.assign(uid="a", pod=pod(**{"nvidia.com/gpu": "1"}), node=node)
    assert flag(given.args, "--host-memory-mib") == str(64 * 1024)
    ledger = Path(flag(given.args, "--host-ledger-dir"))
    assert ledger == tmp_path / "hosts" / "n" and ledger.is_dir()
    assert "--gpu-shape" not in given.args  # a node without gpu: not modelled
    assert DeviceBook(tmp_path).assign(uid="a", pod=pod(), node=node).args == ()


def test_a_time_sliced_node_still_hands_out_slices(tmp_path: Path) -> None:
    book, node = book_with(tmp_path, spec_of(gpus=2, gpuReplicas=2))
    given = book.assign(uid="a", pod=pod(**{"nvidia.com/gpu": "1"}), node=node)
    assert given.env["NVIDIA_VISIBLE_DEVICES"].startswith("GPU-")
    assert "--gpu-ledger-dir" in given.args and "--host-ledger-dir" in given.args
