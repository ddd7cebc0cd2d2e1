"""What a replica says about its adapters (activator.replicas.lora_state).

Covers: the model list's adapters are the cards with a parent; the newest
``vllm:lora_requests_info`` sample is the state; unreadable answers are
errors naming what was wrong; a server without LoRA has no sample.
"""

from __future__ import annotations

import pytest

from activator.replicas.lora_state import LoraInfo, loaded_adapters, lora_info


def test_a_replicas_model_list_and_lora_metric() -> None:
    models = {
        "object": "list",
        "data": [
            {"id": "llama", "parent": None},
            {"id": "sql", "root": "org/sql", "parent": "llama"},
        ],
    }
    assert loaded_adapters(models) == frozenset({"sql"})
    with pytest.raises(ValueError, match="'data' list"):
        loaded_adapters({"models": []})
    text = (
        "# TYPE vllm:lora_requests_info gauge\n"
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a",'
        'waiting_lora_adapters=""} 1.7e9\n'
        'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",'
        'waiting_lora_adapters="c"} 1.8e9\n'
    )
    assert lora_info(text) == LoraInfo(2, frozenset({"a", "b"}), frozenset({"c"}))
    assert lora_info("vllm:num_requests_running 1\n") is None
    with pytest.raises(ValueError, match="max_lora must be a whole number"):
        lora_info('vllm:lora_requests_info{max_lora="x"} 1\n')
