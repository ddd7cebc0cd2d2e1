"""The engine model fitted to a device: speed and KV cache follow the ratios, and vLLM's refusals.

Covers: on the reference the parameters come back unchanged; on a slower
device, in simulated time, a prefill-bound request's time to first token
grows by 1/compute and a decode-bound request's decode time by 1/bandwidth;
the KV cache follows the memory the weights leave (a larger
``gpu_memory_utilization`` gives more, a smaller model too); ``count``
devices multiply the ratios; a model too large for the device, one that
leaves no KV cache, or a ``max_model_len`` beyond the KV cache is refused
with vLLM's words; nonsense arguments are ``ValueError``.
"""

from __future__ import annotations

from typing import Any

import pytest

from groundwork.gpu_catalog import REFERENCE, Device, device
from simulator.engine import Arrival, LlmParams, simulate
from simulator.engine.device_fit import DoesNotFit, fit_to_device
from simulator.engine.sleep_timing import DEFAULT_WEIGHTS_MIB

BASE = LlmParams()


def fit(dev: Device, **kw: Any) -> LlmParams:
    args: dict[str, Any] = {
        "compute_ratio": dev.compute_ratio,
        "bandwidth_ratio": dev.bandwidth_ratio,
        "memory_mib": dev.memory_mib,
        "reference_memory_mib": REFERENCE.memory_mib,
        "weights_mib": DEFAULT_WEIGHTS_MIB,
        "max_model_len": 8192,
    }
    args.update(kw)
    return fit_to_device(BASE, **args)


def test_the_reference_keeps_its_figures() -> None:
    assert fit(REFERENCE) == BASE


@pytest.mark.parametrize(
    "name",
    ["NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "NVIDIA-L4", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S"],
)
def test_prefill_follows_compute_and_decode_follows_bandwidth(name: str) -> None:
    dev = device(name)
    here, there = BASE, fit(dev)
    # One long prompt and one token: the time to first token is prefill.
    prefill = [Arrival(0.0, prompt_tokens=6000, output_tokens=1)]
    ref_ttft = simulate(prefill, here).records[0].ttft_s
    dev_ttft = simulate(prefill, there).records[0].ttft_s
    # Prefill rides on one step whose base is bandwidth-bound: compare the prefill part.
    ref_prefill = ref_ttft - here.step_base_s
    dev_prefill = dev_ttft - there.step_base_s
    assert ref_prefill / dev_prefill == pytest.approx(dev.compute_ratio, rel=1e-6)
    # A short prompt and many tokens: decode steps, bandwidth-bound.
    decode = [Arrival(0.0, prompt_tokens=1, output_tokens=500)]
    ref_decode = simulate(decode, here).records[0]
    dev_decode = simulate(decode, there).records[0]
    ratio = (ref_decode.e2e_s - ref_decode.ttft_s) / (dev_decode.e2e_s - dev_decode.ttft_s)
    assert ratio == pytest.approx(dev.bandwidth_ratio, rel=1e-6)


def test_the_kv_cache_follows_the_memory_left() -> None:
    slice_3g = device("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb")
    # (0.9 x 40448 - 15320 - 4096) / (0.9 x 81559 - 15320 - 4096) of 400,000 tokens.
    expected = int(400_000 * (0.9 * 40_448 - 19_416) / (0.9 * 81_559 - 19_416))
    assert fit(slice_3g).kv_cache_tokens == expected
    assert fit(slice_3g, gpu_memory_utilization=0.95).kv_cache_tokens > expected
    smaller_model = fit(slice_3g, weights_mib=8_000).kv_cache_tokens
    assert smaller_model > expected


def test_count_devices_multiply_the_ratios() -> None:
    l4 = device("NVIDIA-L4")
    one, two = fit(l4), fit(l4, count=2)
    assert two.prefill_tokens_per_s == pytest.approx(2 * one.prefill_tokens_per_s)
    assert two.step_base_s == pytest.approx(one.step_base_s / 2)
    assert two.kv_cache_tokens > 2 * one.kv_cache_tokens  # the weights are paid once


@pytest.mark.parametrize(
    ("name", "kw", "message"),
    [
        pytest.param(
            "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
            {},
            "CUDA out of memory. The model's weights take 15320 MiB; the device has 9984 MiB",
            id="weights-too-large",
        ),
        pytest.param(
            "NVIDIA-H100-80GB-HBM3-MIG-2g.20gb",
            {},
            "No available memory for the cache blocks",
            id="no-kv-cache",
        ),
        pytest.param(
            "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb",
            {"max_model_len": 131_072},
            r"max seq len \(131072\) is larger than the maximum number of tokens that can be "
            r"stored in KV cache \(125861\)",
            id="context-too-long",
        ),
    ],
)
def test_what_does_not_fit_is_refused_as_vllm_does(
    name: str, kw: dict[str, Any], message: str
) -> None:
    with pytest.raises(DoesNotFit, match=message):
        fit(device(name), **kw)


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param({"compute_ratio": 0.0}, id="zero-compute"),
        pytest.param({"count": 0}, id="no-device"),
        pytest.param({"gpu_memory_utilization": 1.5}, id="utilization"),
        pytest.param({"weights_mib": 80_000}, id="does-not-fit-the-reference"),
    ],
)
def test_nonsense_arguments_are_refused(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as caught:
        fit(REFERENCE, **kw)
    assert not isinstance(caught.value, DoesNotFit)
