"""The GPU device a fake vLLM runs on: its flags, and the engine figures it gives.

The sandbox's kubelet tells each fake vLLM what it was given
(``loadtests.sandbox.cluster.devices``): ``--gpu-shape`` names the device
as GPU feature discovery does (``NVIDIA-L4``,
``NVIDIA-H100-80GB-HBM3-MIG-3g.40gb``), ``--gpu-count`` how many,
``--gpu-memory-mib`` its framebuffer, and ``--host-ledger-dir`` with
``--host-memory-mib`` the node's host memory. Run by hand, the same flags
make a server of any shape.

Without ``--gpu-shape`` the performance flags (``--prefill-tokens-per-s``,
``--step-base-s``, ``--kv-cache-tokens``, ...) are the server's own
figures, as always. With it they are the figures on the **reference GPU**
(one H100 80GB, their defaults), and :func:`engine_on_device` scales them
to the device by its ratios (``groundwork.gpu_catalog``) with
``simulator.engine.device_fit``: prefill by compute, decode steps by
memory bandwidth, the KV cache by the memory the weights
(``--weights-mib``) leave at ``--gpu-memory-utilization``. A model that
does not fit the device stops the server at start with vLLM's error, as
a real vLLM would (an 8B model needs ``--max-model-len`` below 131072 on a
40 GB slice).
"""

from __future__ import annotations

import argparse

from groundwork.gpu_catalog import REFERENCE, device
from simulator.engine import LlmParams
from simulator.engine.device_fit import REFERENCE_UTILIZATION, fit_to_device

__all__ = ["configure", "engine_on_device", "gpu_memory_mib"]

#: The framebuffer of a server told nothing: the reference GPU's (an H100 80GB).
DEFAULT_GPU_MEMORY_MIB = 81_920


def configure(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "GPU device and host memory (vLLM only; the sandbox's kubelet sets them)"
    )
    g.add_argument(
        "--gpu-shape",
        metavar="DEVICE",
        default=None,
        help="the GPU or MIG device served on, as GPU feature discovery names it "
        "(NVIDIA-L4, NVIDIA-H100-80GB-HBM3-MIG-3g.40gb); the performance flags are then "
        "the reference H100's figures, scaled to it (default: none, the flags as given)",
    )
    g.add_argument(
        "--gpu-count",
        metavar="N",
        type=int,
        default=1,
        help="devices of that shape (tensor parallel, scaled ideally; default: 1)",
    )
    g.add_argument(
        "--gpu-memory-utilization",
        metavar="SHARE",
        type=float,
        default=REFERENCE_UTILIZATION,
        help="vLLM's flag: the share of the device's memory for weights, activations and "
        f"KV cache, with --gpu-shape (default: {REFERENCE_UTILIZATION})",
    )
    g.add_argument(
        "--host-ledger-dir",
        metavar="DIR",
        default=None,
        help="directory shared by the servers of one node, for its host memory "
        "(default: alone on the node)",
    )
    g.add_argument(
        "--host-memory-mib",
        metavar="MIB",
        type=int,
        default=0,
        help="the node's host memory, MiB; level-1 sleeps past it are refused "
        "(default: 0, no limit)",
    )


def engine_on_device(args: argparse.Namespace, llm: LlmParams) -> LlmParams:
    """``llm`` as it runs on ``--gpu-shape`` (unchanged without one).

    Raises ``ValueError`` for an unknown device, and
    :class:`~simulator.engine.device_fit.DoesNotFit` (a ``ValueError``)
    when the model cannot start there.
    """
    if args.gpu_shape is None:
        return llm
    given = device(args.gpu_shape)
    return fit_to_device(
        llm,
        compute_ratio=given.compute_ratio,
        bandwidth_ratio=given.bandwidth_ratio,
        memory_mib=given.memory_mib,
        reference_memory_mib=REFERENCE.memory_mib,
        weights_mib=args.weights_mib,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        count=args.gpu_count,
    )


def gpu_memory_mib(args: argparse.Namespace) -> int:
    """The framebuffer budget: ``--gpu-memory-mib``, else the device's, else the reference's."""
    if args.gpu_memory_mib is not None:
        return int(args.gpu_memory_mib)
    if args.gpu_shape is not None:
        return int(device(args.gpu_shape).memory_mib * args.gpu_count)
    return DEFAULT_GPU_MEMORY_MIB
