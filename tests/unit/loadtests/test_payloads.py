"""Request bodies (loadtests.payloads).

Covers:
- chat and completions bodies ask for an exact output length (max_tokens
  with ignore_eos) and, when streamed, for the usage event;
- token-id prompts have exactly the asked length; text prompts start with a
  nonce so that no two requests share a prefix;
- the KServe v2 body's tensors, with and without the max_tokens input;
- bad lengths and endpoints are refused with the value in the message.
"""

from __future__ import annotations

import random

import pytest

from loadtests import payloads


def test_streamed_chat_body_asks_for_exact_length_and_usage() -> None:
    body = payloads.chat_body(
        model="m", prompt_tokens=50, output_tokens=7, stream=True, rng=random.Random(1)
    )
    assert body["model"] == "m"
    assert (body["max_tokens"], body["ignore_eos"], body["stream"]) == (7, True, True)
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0]["role"] == "user"
    assert body["messages"][0]["content"].count(" hi") == 46


def test_non_streamed_completion_body_with_token_ids() -> None:
    body = payloads.completion_body(
        model="m", prompt_tokens=33, output_tokens=4, stream=False, rng=random.Random(1),
        token_ids=True,
    )  # fmt: skip
    assert "stream_options" not in body
    assert body["stream"] is False
    assert len(body["prompt"]) == 33
    assert all(isinstance(t, int) and t > 0 for t in body["prompt"])


def test_prompts_do_not_share_a_prefix() -> None:
    rng = random.Random(5)
    prompts = {payloads.make_prompt(100, rng)[:8] for _ in range(50)}
    assert len(prompts) == 50


def test_triton_body() -> None:
    body = payloads.triton_body(prompt_tokens=10, output_tokens=3, rng=random.Random(0))
    names = [(t["name"], t["datatype"]) for t in body["inputs"]]
    assert names == [("text_input", "BYTES"), ("max_tokens", "INT32")]
    assert body["inputs"][1]["data"] == [3]
    bare = payloads.triton_body(
        prompt_tokens=10, output_tokens=3, rng=random.Random(0), text_input="PROMPT",
        max_tokens_input="",
    )  # fmt: skip
    assert [t["name"] for t in bare["inputs"]] == ["PROMPT"]


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match="got 0"):
        payloads.make_prompt(0, random.Random())
    with pytest.raises(ValueError, match="got 0"):
        payloads.chat_body(model="m", prompt_tokens=1, output_tokens=0, stream=True,
                           rng=random.Random())  # fmt: skip
    with pytest.raises(ValueError, match="embeddings"):
        payloads.endpoint_path("embeddings")  # type: ignore[arg-type]
