"""GPUs and MIG slices, and what each one is worth next to the reference GPU.

Tidal's engine model (the fake vLLM, ``tidal simulate``) is fitted to
Llama-3.1-8B on one H100 80GB SXM, the **reference GPU**. A replica on
other hardware (a whole L4, a ``3g.40gb`` slice of an A100) is that model
scaled by three ratios to the reference, which this module states once so
that the sandbox, the simulator and the scaler's capacity prior agree:

- **compute**: prefill is compute-bound; the ratio of dense BF16 tensor
  TFLOPS (a MIG slice: its fraction of the GPU's SMs);
- **bandwidth**: a decode step reads every weight once, so it is
  memory-bound; the ratio of memory bandwidth (a MIG slice: its fraction of
  the memory slices, which carry their memory controllers and L2);
- **memory**: the framebuffer the device reports, which bounds the weights
  and the KV cache (a MIG slice: its own, hard-partitioned).

Figures and their sources (dense figures are half the datasheets'
"with sparsity" ones):

    GPU (GFD product)       BF16 TFLOPS  bandwidth    memory MiB  SMs  CC
    NVIDIA-H100-80GB-HBM3   989.5        3,350 GB/s   81,559      132  9.0
    NVIDIA-A100-SXM4-80GB   312          2,039 GB/s   81,920      108  8.0
    NVIDIA-A100-SXM4-40GB   312          1,555 GB/s   40,960      108  8.0
    NVIDIA-L40S             362.05       864 GB/s     46,068      142  8.9
    NVIDIA-L4               121          300 GB/s     23,034       58  8.9

- H100: NVIDIA H100 Tensor Core GPU datasheet, SXM5 column (BF16 1,979
  TFLOPS with sparsity, 80 GB HBM3 at 3.35 TB/s);
- A100: NVIDIA A100 Tensor Core GPU datasheet (BF16 312 TFLOPS dense;
  80GB HBM2e at 2,039 GB/s, 40GB HBM2 at 1,555 GB/s);
- L40S: NVIDIA L40S datasheet (BF16 362.05 TFLOPS dense, 48 GB GDDR6 at
  864 GB/s); L4: NVIDIA L4 datasheet (BF16 242 TFLOPS with sparsity,
  24 GB GDDR6 at 300 GB/s);
- memory in MiB as ``nvidia-smi`` and GPU feature discovery's
  ``nvidia.com/gpu.memory`` label report it (a little under the marketing
  GB: ECC and the driver's reservation).

MIG profiles follow NVIDIA's Multi-Instance GPU User Guide, "Supported MIG
Profiles": a GPU has 7 compute slices and 8 memory slices; a profile
``<c>g.<m>gb`` takes ``c`` sevenths of the SMs and a fraction of the memory
slices, and the table gives how many instances of it one GPU holds. The
A100-SXM4-80GB and H100 80GB take the same profile names (1g.10gb,
1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb); the A100-SXM4-40GB's are
half the memory (1g.5gb ... 7g.40gb). Each profile's framebuffer and SM
count are those ``nvidia-smi mig -lgip`` lists for the product (and GPU
feature discovery repeats as ``nvidia.com/mig-<profile>.memory`` and
``.multiprocessors``: 9,984 MiB and 16 SMs for an H100's 1g.10gb, 40,192
MiB and 42 SMs for an A100-80GB's 3g.40gb). The L4 and L40S have no MIG.

The named layouts (``all-3g.40gb``, ``all-balanced``, ...) are the GPU
operator's default ``mig-parted`` configurations, the values of the
``nvidia.com/mig.config`` node label.

Main decision: the ratios are a **prior**, from spec sheets, not a
measurement. Real prefill on an A100 reaches a larger share of an H100's
than 312/989 (neither runs at its peak), which is why the scaler learns
each shape's capacity online and uses these only to start from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "GPUS",
    "GPU_RESOURCE",
    "MIG_COMPUTE_SLICES",
    "MIG_MEMORY_SLICES",
    "MIG_RESOURCE_PREFIX",
    "REFERENCE",
    "Device",
    "GpuModel",
    "MigProfile",
    "device",
    "device_for",
    "gpu_model",
]

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
MIG_COMPUTE_SLICES = 7
MIG_MEMORY_SLICES = 8


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One MIG profile of one GPU product, as the MIG user guide and ``nvidia-smi`` give it."""

    name: str  # "3g.40gb"
    compute_slices: int  # sevenths of the SMs
    memory_slices: int  # eighths of the memory
    max_instances: int  # on one GPU
    memory_mib: int
    multiprocessors: int

    @property
    def resource(self) -> str:
        """The device plugin's resource under the mixed strategy: ``nvidia.com/mig-3g.40gb``."""
        return MIG_RESOURCE_PREFIX + self.name


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU product: its spec-sheet figures, its MIG profiles and named layouts."""

    name: str  # the short name a nodes file uses: "H100-80GB"
    product: str  # GPU feature discovery's nvidia.com/gpu.product
    family: str  # nvidia.com/gpu.family
    compute_capability: tuple[int, int]
    bf16_tflops: float  # dense
    bandwidth_gb_s: float
    memory_mib: int
    multiprocessors: int
    mig_profiles: tuple[MigProfile, ...] = ()
    # nvidia.com/mig.config name -> MIG devices per GPU.
    mig_layouts: Mapping[str, Mapping[str, int]] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, hash=False
    )

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    def profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.mig_profiles if p.name == name), None)

    def check_mig_devices(self, devices: Mapping[str, int]) -> None:
        """Raise ``ValueError`` unless one GPU can hold ``devices`` (profile name -> count).

        The rule of the MIG user guide's profile table: each profile within
        its instance count, and all of them within the GPU's 7 compute and
        8 memory slices. (The guide's placement diagram forbids a few
        layouts this sum allows; the operator's named ones all pass both.)
        """
        if not self.mig_capable:
            raise ValueError(f"{self.product} has no MIG")
        compute = memory = 0
        for name, count in devices.items():
            profile = self.profile(name)
            if profile is None:
                known = ", ".join(p.name for p in self.mig_profiles)
                raise ValueError(
                    f"{self.product} has no MIG profile {name!r}; its profiles: {known}"
                )
            if not 1 <= count <= profile.max_instances:
                raise ValueError(
                    f"{count} x {name} on one {self.product}: 1 to {profile.max_instances} fit"
                )
            compute += profile.compute_slices * count
            memory += profile.memory_slices * count
        if not devices or compute > MIG_COMPUTE_SLICES or memory > MIG_MEMORY_SLICES:
            raise ValueError(
                f"MIG devices {dict(devices)} take {compute}/{MIG_COMPUTE_SLICES} compute and "
                f"{memory}/{MIG_MEMORY_SLICES} memory slices of one {self.product}; "
                "at least one device, within both"
            )


@dataclass(frozen=True, slots=True)
class Device:
    """What one container is given: a whole GPU, or one MIG instance of one.

    ``name`` is how the device calls itself: the product for a whole GPU,
    ``<product>-MIG-<profile>`` for a MIG instance (GPU feature discovery's
    ``nvidia.com/mig-<profile>.product``).
    """

    gpu: GpuModel
    profile: MigProfile | None = None

    @property
    def name(self) -> str:
        if self.profile is None:
            return self.gpu.product
        return f"{self.gpu.product}-MIG-{self.profile.name}"

    @property
    def resource(self) -> str:
        """The extended resource a pod asks for to get this device."""
        return GPU_RESOURCE if self.profile is None else self.profile.resource

    @property
    def memory_mib(self) -> int:
        return self.gpu.memory_mib if self.profile is None else self.profile.memory_mib

    @property
    def multiprocessors(self) -> int:
        return self.gpu.multiprocessors if self.profile is None else self.profile.multiprocessors

    @property
    def compute_ratio(self) -> float:
        """Prefill speed against the reference GPU (dense BF16 TFLOPS, a slice's share of SMs)."""
        share = 1.0 if self.profile is None else self.profile.compute_slices / MIG_COMPUTE_SLICES
        return self.gpu.bf16_tflops * share / _REFERENCE_GPU.bf16_tflops

    @property
    def bandwidth_ratio(self) -> float:
        """Decode speed against the reference GPU (memory bandwidth, a slice's memory slices)."""
        share = 1.0 if self.profile is None else self.profile.memory_slices / MIG_MEMORY_SLICES
        return self.gpu.bandwidth_gb_s * share / _REFERENCE_GPU.bandwidth_gb_s

    @property
    def memory_ratio(self) -> float:
        """Framebuffer against the reference GPU's."""
        return self.memory_mib / _REFERENCE_GPU.memory_mib


def _profiles(
    rows: tuple[tuple[str, int, int, int, int, int], ...],
) -> tuple[MigProfile, ...]:
    return tuple(MigProfile(*row) for row in rows)


def _layouts(
    profiles: tuple[MigProfile, ...], balanced: Mapping[str, int]
) -> Mapping[str, Mapping[str, int]]:
    """The operator's default mig-parted configs: one profile everywhere, or balanced."""
    layouts: dict[str, Mapping[str, int]] = {
        f"all-{p.name}": MappingProxyType({p.name: p.max_instances}) for p in profiles
    }
    layouts["all-balanced"] = MappingProxyType(dict(balanced))
    return MappingProxyType(layouts)


# name, sevenths of SMs, eighths of memory, instances per GPU, MiB, SMs
_H100_PROFILES = _profiles(
    (
        ("1g.10gb", 1, 1, 7, 9_984, 16),
        ("1g.20gb", 1, 2, 4, 20_096, 26),
        ("2g.20gb", 2, 2, 3, 20_096, 32),
        ("3g.40gb", 3, 4, 2, 40_448, 60),
        ("4g.40gb", 4, 4, 1, 40_448, 64),
        ("7g.80gb", 7, 8, 1, 81_152, 132),
    )
)
_A100_80_PROFILES = _profiles(
    (
        ("1g.10gb", 1, 1, 7, 9_728, 14),
        ("1g.20gb", 1, 2, 4, 19_968, 14),
        ("2g.20gb", 2, 2, 3, 19_968, 28),
        ("3g.40gb", 3, 4, 2, 40_192, 42),
        ("4g.40gb", 4, 4, 1, 40_192, 56),
        ("7g.80gb", 7, 8, 1, 80_896, 98),
    )
)
_A100_40_PROFILES = _profiles(
    (
        ("1g.5gb", 1, 1, 7, 4_864, 14),
        ("1g.10gb", 1, 2, 4, 9_856, 14),
        ("2g.10gb", 2, 2, 3, 9_856, 28),
        ("3g.20gb", 3, 4, 2, 20_096, 42),
        ("4g.20gb", 4, 4, 1, 20_096, 56),
        ("7g.40gb", 7, 8, 1, 40_448, 98),
    )
)
_BALANCED_80 = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
_BALANCED_40 = {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}

H100_80GB = GpuModel(
    name="H100-80GB",
    product="NVIDIA-H100-80GB-HBM3",
    family="hopper",
    compute_capability=(9, 0),
    bf16_tflops=989.5,
    bandwidth_gb_s=3_350.0,
    memory_mib=81_559,
    multiprocessors=132,
    mig_profiles=_H100_PROFILES,
    mig_layouts=_layouts(_H100_PROFILES, _BALANCED_80),
)
A100_80GB = GpuModel(
    name="A100-80GB",
    product="NVIDIA-A100-SXM4-80GB",
    family="ampere",
    compute_capability=(8, 0),
    bf16_tflops=312.0,
    bandwidth_gb_s=2_039.0,
    memory_mib=81_920,
    multiprocessors=108,
    mig_profiles=_A100_80_PROFILES,
    mig_layouts=_layouts(_A100_80_PROFILES, _BALANCED_80),
)
A100_40GB = GpuModel(
    name="A100-40GB",
    product="NVIDIA-A100-SXM4-40GB",
    family="ampere",
    compute_capability=(8, 0),
    bf16_tflops=312.0,
    bandwidth_gb_s=1_555.0,
    memory_mib=40_960,
    multiprocessors=108,
    mig_profiles=_A100_40_PROFILES,
    mig_layouts=_layouts(_A100_40_PROFILES, _BALANCED_40),
)
L40S = GpuModel(
    name="L40S",
    product="NVIDIA-L40S",
    family="ada-lovelace",
    compute_capability=(8, 9),
    bf16_tflops=362.05,
    bandwidth_gb_s=864.0,
    memory_mib=46_068,
    multiprocessors=142,
)
L4 = GpuModel(
    name="L4",
    product="NVIDIA-L4",
    family="ada-lovelace",
    compute_capability=(8, 9),
    bf16_tflops=121.0,
    bandwidth_gb_s=300.0,
    memory_mib=23_034,
    multiprocessors=58,
)

#: Every GPU this catalog knows, the reference first.
GPUS: tuple[GpuModel, ...] = (H100_80GB, A100_80GB, A100_40GB, L40S, L4)
_REFERENCE_GPU = H100_80GB
#: The device the engine model's defaults describe.
REFERENCE = Device(_REFERENCE_GPU)


def gpu_model(name: str) -> GpuModel | None:
    """The GPU whose short name (``H100-80GB``) or GFD product (``NVIDIA-L4``) this is."""
    text = name.strip()
    return next((g for g in GPUS if text in (g.name, g.product)), None)


def device(name: str) -> Device:
    """The device a name stands for: a product (a whole GPU) or ``<product>-MIG-<profile>``.

    Short GPU names are taken too (``L4``, ``H100-80GB-MIG-3g.40gb``).
    Raises ``ValueError`` naming the known devices.
    """
    text = name.strip()
    base, sep, profile_name = text.partition("-MIG-")
    gpu = gpu_model(base)
    if gpu is not None and not sep:
        return Device(gpu)
    if gpu is not None:
        profile = gpu.profile(profile_name)
        if profile is not None:
            return Device(gpu, profile)
        known = ", ".join(p.name for p in gpu.mig_profiles) or "none (it has no MIG)"
        raise ValueError(
            f"{gpu.product} has no MIG profile {profile_name!r}; its profiles: {known}"
        )
    products = ", ".join(g.product for g in GPUS)
    raise ValueError(
        f"unknown GPU device {text!r}: a GPU product ({products}), "
        "optionally with -MIG-<profile> (such as NVIDIA-H100-80GB-HBM3-MIG-3g.40gb)"
    )


def device_for(product: str, resource: str) -> Device | None:
    """The device a pod gets when it asks for ``resource`` on a node of ``product``.

    ``nvidia.com/gpu`` is a whole GPU; ``nvidia.com/mig-<profile>`` an
    instance of that profile. ``None`` when the product or the profile is
    not in the catalog (or the resource is neither).
    """
    gpu = gpu_model(product)
    if gpu is None:
        return None
    if resource == GPU_RESOURCE:
        return Device(gpu)
    if resource.startswith(MIG_RESOURCE_PREFIX):
        profile = gpu.profile(resource[len(MIG_RESOURCE_PREFIX) :])
        return None if profile is None else Device(gpu, profile)
    return None
