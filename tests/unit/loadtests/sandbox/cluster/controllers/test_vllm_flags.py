"""Which of a container's vLLM flags reach the fake vLLM, and in what order.

Covers: the memory and batch flags real vLLM reads, in either spelling and
either form, from command and args; other flags stay out; a flag without
a value is left out; the last setting of a flag wins; on the fake server's
command line they come before ``sandbox.tidal.dev/args``, which therefore
wins, and a Triton pod gets none.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster.controllers.kubelet import server_spec_for
from loadtests.sandbox.cluster.controllers.vllm_flags import tuning_flags


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        pytest.param(
            {"args": ["--model", "m", "--max-model-len", "8192", "--port", "8000"]},
            ("--max-model-len", "8192"),
            id="space",
        ),
        pytest.param(
            {"args": ["--gpu-memory-utilization=0.95", "--max_num_seqs=64"]},
            ("--gpu-memory-utilization", "0.95", "--max-num-seqs", "64"),
            id="equals-and-underscores",
        ),
        pytest.param(
            {"command": ["vllm", "serve", "m", "--max-num-batched-tokens", "4096"], "args": []},
            ("--max-num-batched-tokens", "4096"),
            id="in-the-command",
        ),
        pytest.param(
            {"args": ["--max-model-len", "4096", "--max-model-len", "16384"]},
            ("--max-model-len", "16384"),
            id="last-wins",
        ),
        pytest.param({"args": ["--max-model-len", "--enforce-eager"]}, (), id="no-value"),
        pytest.param(
            {"args": ["--quantization", "fp8", "--tensor-parallel-size", "2"]}, (), id="not-ours"
        ),
        pytest.param({}, (), id="none"),
    ],
)
def test_tuning_flags(container: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert tuning_flags(container) == expected


def _pod(engine: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "default",
            "annotations": {
                "sandbox.tidal.dev/engine": engine,
                "sandbox.tidal.dev/args": "--max-model-len 2048",
            },
        },
        "spec": {"containers": [{"name": "c", "args": ["--max-model-len", "8192"]}]},
    }


def test_the_annotation_comes_after_and_wins() -> None:
    spec = server_spec_for(_pod("vllm"), host="127.0.0.9", default_port=8000, node_name="n")
    assert spec.extra_args == ("--max-model-len", "8192", "--max-model-len", "2048")
    triton = server_spec_for(_pod("triton"), host="127.0.0.9", default_port=8000, node_name="n")
    assert triton.extra_args == ("--max-model-len", "2048")
