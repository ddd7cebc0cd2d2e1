"""The fake vLLM against the official openai client and plain HTTP.

Covers:
- the unmodified ``openai`` client completes chat and completion requests,
  streaming and not, with max_tokens, ignore_eos, include_usage and usage,
  continuous_usage_stats (the usage so far in every chunk);
- /v1/models, /health, /version; several served names (comma-separated, as
  the sandbox gives a Deployment routing several), each listed, accepted and
  echoed; vLLM-shaped errors (unknown model 404,
  bad max_tokens 400, context too long 400, bad JSON 400);
- /metrics: every vLLM name the issue lists, label model_name, counters move;
- one coarse real-time check: a request's latency at speedup 1 is near what
  the model predicts (wide bounds; the precise checks are in the unit tests).
"""

from __future__ import annotations

import time

import aiohttp
import openai
import pytest

from loadtests.sandbox.servers.server import ModelServer
from simulator.engine import LlmParams
from tests.integration.loadtests.sandbox.servers.conftest import scrape, vllm_config

IGNORE_EOS = {"ignore_eos": True}


@pytest.fixture
async def server() -> ModelServer:  # type: ignore[misc]
    async with ModelServer(vllm_config(speedup=100.0)) as s:
        yield s


@pytest.fixture
async def client(server: ModelServer) -> openai.AsyncOpenAI:  # type: ignore[misc]
    c = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    yield c
    await c.close()


async def test_chat_completion(client: openai.AsyncOpenAI) -> None:
    reply = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Say hello in five words."}],
        max_tokens=5,
        extra_body=IGNORE_EOS,
    )
    assert reply.object == "chat.completion"
    assert reply.choices[0].message.role == "assistant"
    assert len(reply.choices[0].message.content.split()) == 5  # type: ignore[union-attr]
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 5
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 5


async def test_completion_without_ignore_eos_stops_by_itself_or_at_max_tokens(
    client: openai.AsyncOpenAI,
) -> None:
    for _ in range(5):
        reply = await client.completions.create(model="m", prompt="Once upon a time", max_tokens=8)
        choice = reply.choices[0]
        assert reply.usage is not None
        n = reply.usage.completion_tokens
        assert 1 <= n <= 8
        assert len(choice.text.split()) == n
        assert choice.finish_reason == ("length" if n == 8 else "stop")


async def test_streaming_chat_with_usage(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Count."}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body=IGNORE_EOS,
    )
    contents: list[str] = []
    finish: list[str | None] = []
    usage = None
    async for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.choices:
            contents.append(chunk.choices[0].delta.content or "")
            finish.append(chunk.choices[0].finish_reason)
        if chunk.usage is not None:
            usage = chunk.usage
    assert len("".join(contents).split()) == 12
    assert finish[-1] == "length"
    assert set(finish[:-1]) == {None}
    assert usage is not None
    assert usage.completion_tokens == 12


async def test_streaming_with_continuous_usage_stats(client: openai.AsyncOpenAI) -> None:
    stream = await client.completions.create(
        model="m",
        prompt="abcdefgh",  # 8 characters: 2 tokens by the stated rule
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},  # type: ignore[typeddict-unknown-key]
        extra_body=IGNORE_EOS,
    )
    usages = [
        (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens)
        async for c in stream
        if c.usage is not None
    ]
    # One per token, then the last chunk's usage alone.
    assert usages == [(2, n, 2 + n) for n in (1, 2, 3, 4, 5, 5)]


async def test_streaming_completion(client: openai.AsyncOpenAI) -> None:
    stream = await client.completions.create(
        model="m", prompt=[1, 2, 3, 4], max_tokens=6, stream=True, extra_body=IGNORE_EOS
    )
    texts = [chunk.choices[0].text async for chunk in stream]
    assert len(texts) == 6
    assert all(t.startswith(" ") for t in texts)


async def test_models_health_version(server: ModelServer, client: openai.AsyncOpenAI) -> None:
    models = await client.models.list()
    assert [m.id for m in models.data] == ["m"]
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{server.url}/health") as resp:
            assert resp.status == 200
        async with session.get(f"{server.url}/version") as resp:
            assert "version" in await resp.json()


async def test_several_served_names() -> None:
    async with ModelServer(vllm_config(model="llama-3-8b,llama", speedup=100.0)) as server:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        try:
            assert [m.id for m in (await client.models.list()).data] == ["llama-3-8b", "llama"]
            answer = await client.completions.create(model="llama", prompt="x", max_tokens=2)
            assert answer.model == "llama"
        finally:
            await client.close()


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        pytest.param({"model": "other", "prompt": "x"}, 404, "does not exist", id="unknown model"),
        pytest.param({"prompt": "x", "max_tokens": 0}, 400, "max_tokens", id="max_tokens 0"),
        pytest.param({"prompt": "x", "max_tokens": 200_000}, 400, "context length", id="too long"),
        pytest.param({"prompt": "x", "n": 2}, 400, "n=1", id="n > 1"),
        pytest.param({"max_tokens": 3}, 400, "prompt is required", id="no prompt"),
    ],
)
async def test_errors_in_vllm_shape(
    server: ModelServer, body: dict[str, object], status: int, needle: str
) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server.url}/v1/completions", json=body) as resp,
    ):
        assert resp.status == status
        error = await resp.json()
    assert error["object"] == "error"
    assert error["code"] == status
    assert needle in error["message"]


async def test_bad_json_is_400(server: ModelServer) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server.url}/v1/chat/completions", data=b"{nope") as resp,
    ):
        assert resp.status == 400


async def test_metrics_names_and_labels(server: ModelServer, client: openai.AsyncOpenAI) -> None:
    await client.completions.create(
        model="m", prompt="abcdefgh", max_tokens=4, extra_body=IGNORE_EOS
    )
    async with aiohttp.ClientSession() as session:
        samples = await scrape(session, server.url)
    label = '{model_name="m"}'
    for gauge in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        assert f"vllm:{gauge}{label}" in samples
    assert samples[f"vllm:request_success_total{label}"] == 1
    assert samples[f"vllm:prompt_tokens_total{label}"] == 2  # 8 characters
    assert samples[f"vllm:generation_tokens_total{label}"] == 4
    assert samples[f"vllm:time_to_first_token_seconds_count{label}"] == 1
    assert samples[f"vllm:e2e_request_latency_seconds_count{label}"] == 1


async def test_coarse_real_time_latency() -> None:
    params = LlmParams()
    prompt_tokens, output_tokens = 200, 40
    expected_ttft = params.step_time_s(decoding=0, prefill_tokens=prompt_tokens)
    expected_e2e = expected_ttft + (output_tokens - 1) * params.step_time_s(
        decoding=1, prefill_tokens=0
    )
    async with ModelServer(vllm_config(speedup=1.0)) as server:
        c = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        try:
            started = time.perf_counter()
            await c.completions.create(
                model="m",
                prompt="x" * 4 * prompt_tokens,
                max_tokens=output_tokens,
                extra_body=IGNORE_EOS,
            )
            elapsed = time.perf_counter() - started
        finally:
            await c.close()
    # Wall-clock on a shared machine: never faster than the model, at most 3x slower.
    assert expected_e2e * 0.95 <= elapsed <= expected_e2e * 3 + 0.2
