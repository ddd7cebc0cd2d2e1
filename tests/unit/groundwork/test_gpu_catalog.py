"""The GPU catalog: ratios to the reference GPU, MIG profiles and layouts, device names.

Covers: the reference is 1 on every ratio and the others follow the spec
sheets (compute from dense BF16 TFLOPS, bandwidth, memory) and a MIG
profile's slices; every profile and named layout fits its GPU under the MIG
guide's slice rule, and bad layouts are refused naming the rule; the 80 GB
products carry the profile names NVIDIA gives them; every device name reads
back as the same device; unknown products and profiles are refused naming
what is known; ``device_for`` maps a resource on a product to its device.
"""

from __future__ import annotations

import pytest

from groundwork.gpu_catalog import (
    GPUS,
    MIG_COMPUTE_SLICES,
    MIG_MEMORY_SLICES,
    REFERENCE,
    Device,
    GpuModel,
    device,
    device_for,
    gpu_model,
)


def test_the_reference_is_one_on_every_ratio() -> None:
    assert REFERENCE.name == "NVIDIA-H100-80GB-HBM3"
    ratios = (REFERENCE.compute_ratio, REFERENCE.bandwidth_ratio, REFERENCE.memory_ratio)
    assert ratios == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("name", "compute", "bandwidth", "memory_mib"),
    [
        pytest.param("NVIDIA-A100-SXM4-80GB", 312 / 989.5, 2039 / 3350, 81_920, id="a100-80gb"),
        pytest.param("NVIDIA-A100-SXM4-40GB", 312 / 989.5, 1555 / 3350, 40_960, id="a100-40gb"),
        pytest.param("NVIDIA-L40S", 362.05 / 989.5, 864 / 3350, 46_068, id="l40s"),
        pytest.param("NVIDIA-L4", 121 / 989.5, 300 / 3350, 23_034, id="l4"),
        # A slice: its sevenths of the SMs, its eighths of the memory (and bandwidth).
        pytest.param("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", 3 / 7, 4 / 8, 40_448, id="h100-3g"),
        pytest.param("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", 1 / 7, 1 / 8, 9_984, id="h100-1g"),
        pytest.param("NVIDIA-H100-80GB-HBM3-MIG-7g.80gb", 1.0, 1.0, 81_152, id="h100-7g"),
        pytest.param(
            "NVIDIA-A100-SXM4-80GB-MIG-2g.20gb",
            312 / 989.5 * 2 / 7,
            2039 / 3350 * 2 / 8,
            19_968,
            id="a100-2g",
        ),
    ],
)
def test_ratios_follow_the_spec_sheets_and_the_slices(
    name: str, compute: float, bandwidth: float, memory_mib: int
) -> None:
    got = device(name)
    assert got.compute_ratio == pytest.approx(compute)
    assert got.bandwidth_ratio == pytest.approx(bandwidth)
    assert got.memory_mib == memory_mib
    assert got.memory_ratio == pytest.approx(memory_mib / 81_559)


def test_the_80gb_products_carry_nvidias_profile_names() -> None:
    names = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    for product in ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"):
        gpu = gpu_model(product)
        assert gpu is not None and [p.name for p in gpu.mig_profiles] == names
    l4 = gpu_model("L4")
    assert l4 is not None and not l4.mig_capable


@pytest.mark.parametrize("gpu", [g for g in GPUS if g.mig_capable], ids=lambda g: g.name)
def test_every_profile_and_layout_fits_its_gpu(gpu: GpuModel) -> None:
    for profile in gpu.mig_profiles:
        assert profile.compute_slices * profile.max_instances <= MIG_COMPUTE_SLICES
        assert profile.memory_slices * profile.max_instances <= MIG_MEMORY_SLICES
        assert profile.resource == f"nvidia.com/mig-{profile.name}"
    assert "all-balanced" in gpu.mig_layouts
    for layout in gpu.mig_layouts.values():
        gpu.check_mig_devices(layout)  # raises if not


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        pytest.param({"3g.40gb": 3}, "3 x 3g.40gb on one .*: 1 to 2 fit", id="too-many-of-one"),
        pytest.param({"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}, "8/7 compute", id="compute"),
        pytest.param({"3g.40gb": 2, "1g.10gb": 1}, "9/8 memory", id="memory"),
        pytest.param({"5g.50gb": 1}, "no MIG profile '5g.50gb'", id="unknown-profile"),
        pytest.param({}, "at least one device", id="empty"),
    ],
)
def test_a_layout_that_does_not_fit_is_refused(devices: dict[str, int], message: str) -> None:
    gpu = gpu_model("H100-80GB")
    assert gpu is not None
    with pytest.raises(ValueError, match=message):
        gpu.check_mig_devices(devices)


def test_every_device_name_reads_back() -> None:
    for gpu in GPUS:
        for dev in (Device(gpu), *(Device(gpu, p) for p in gpu.mig_profiles)):
            assert device(dev.name) == dev
    assert device("L4") == device("NVIDIA-L4")
    assert device("H100-80GB-MIG-3g.40gb") == device("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param(
            "NVIDIA-B200", "unknown GPU device 'NVIDIA-B200': a GPU product", id="product"
        ),
        pytest.param("NVIDIA-L4-MIG-1g.6gb", "NVIDIA-L4 has no MIG profile", id="l4-has-no-mig"),
        pytest.param(
            "NVIDIA-H100-80GB-HBM3-MIG-3g.20gb", "its profiles: 1g.10gb, 1g.20gb", id="profile"
        ),
    ],
)
def test_unknown_devices_are_refused_naming_the_known(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        device(name)


@pytest.mark.parametrize(
    ("product", "resource", "expected"),
    [
        pytest.param("NVIDIA-L4", "nvidia.com/gpu", "NVIDIA-L4", id="whole"),
        pytest.param(
            "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/mig-3g.40gb",
            "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb",
            id="mig",
        ),
        pytest.param("NVIDIA-L4", "nvidia.com/mig-1g.10gb", None, id="no-such-profile"),
        pytest.param("NVIDIA-T4", "nvidia.com/gpu", None, id="unknown-product"),
        pytest.param("NVIDIA-L4", "amd.com/gpu", None, id="other-resource"),
    ],
)
def test_device_for_a_resource_on_a_product(
    product: str, resource: str, expected: str | None
) -> None:
    got = device_for(product, resource)
    assert (got.name if got else None) == expected
