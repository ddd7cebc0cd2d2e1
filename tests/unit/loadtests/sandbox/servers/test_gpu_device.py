"""The fake vLLM's device flags: what a server built from them is, and how it refuses to start.

Covers: without ``--gpu-shape`` the flags are the server's figures and its
framebuffer the reference's; with one, the engine is fitted to the device,
its framebuffer and KV-cache memory follow, and an explicit
``--gpu-memory-mib`` still wins; host memory flags reach the config; an
unknown device is a usage error (exit 2) naming the known ones, and a model
that does not fit exits 1 with vLLM's message, as vLLM dies.
"""

from __future__ import annotations

import argparse

import pytest

from loadtests.sandbox.servers.cli import config_from_args, configure, run
from simulator.engine import LlmParams
from simulator.engine.sleep_timing import kv_cache_mib


def flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


def test_without_a_shape_the_flags_are_the_servers_figures() -> None:
    config = config_from_args(flags("--kv-cache-tokens", "1000"))
    assert config.llm.kv_cache_tokens == 1000 and config.device is None
    assert config.llm.prefill_tokens_per_s == LlmParams().prefill_tokens_per_s
    assert config.sleep.gpu_memory_mib == 81_920


def test_a_shape_fits_the_engine_and_the_memory_to_the_device() -> None:
    config = config_from_args(
        flags(
            "--gpu-shape", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "--max-model-len", "8192",
            "--host-ledger-dir", "/tmp/h", "--host-memory-mib", "4096",
        )
    )  # fmt: skip
    assert config.device == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"
    assert config.llm.prefill_tokens_per_s < LlmParams().prefill_tokens_per_s / 3
    assert config.sleep.gpu_memory_mib == 40_192
    assert config.sleep.kv_cache_mib == kv_cache_mib(config.llm.kv_cache_tokens)
    assert (config.host_ledger_dir, config.host_memory_mib) == ("/tmp/h", 4096)
    two = config_from_args(
        flags("--gpu-shape", "NVIDIA-L4", "--gpu-count", "2", "--gpu-memory-mib", "1000")
    )
    assert two.sleep.gpu_memory_mib == 1000


def test_an_unknown_device_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(flags("--gpu-shape", "NVIDIA-T4")) == 2
    assert "unknown GPU device 'NVIDIA-T4': a GPU product (NVIDIA-H100" in capsys.readouterr().err


def test_a_model_that_does_not_fit_dies_as_vllm_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(flags("--gpu-shape", "NVIDIA-L4")) == 1
    err = capsys.readouterr().err
    assert err.startswith("ValueError: The model's max seq len (131072) is larger than")
