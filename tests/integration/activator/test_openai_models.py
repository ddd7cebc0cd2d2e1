"""The activator as an OpenAI endpoint, over loopback.

Covers:
- ``GET /v1/models`` that no route claims lists every model routed by
  name, the one at zero replicas included, and the official ``openai``
  client reads it; ``HEAD`` answers with no body; nothing is sent to a
  replica;
- a path or host route still claims ``/v1/models`` and forwards it to its
  target;
- ``GET /v1/models/{id}`` answers one model as OpenAI's retrieval does (the
  official client's ``models.retrieve``, a name with a ``/`` included), and
  an unknown one is a 404;
- an unknown ``model`` is a 404 in the OpenAI error shape naming the model
  asked for and those served; a body that is not JSON (the parser's
  position), not an object, or has no ``model`` string is a 400 of its own;
  the activator's log names each refusal as the client was told it.
"""

from __future__ import annotations

import logging

import aiohttp
import openai
import pytest

from tests.integration.activator.helpers import (
    Backend,
    StaticSource,
    free_port,
    running_activator,
    settings,
    spec,
)


async def test_models_listed_also_at_zero_and_read_by_openai(
    client: aiohttp.ClientSession,
) -> None:
    warm = await Backend(name="warm").start()
    try:
        source = StaticSource(
            spec("ml/llama", warm.endpoint, models=("llama-3-8b",), path_prefix=None),
            # No ready replica: scaled to zero, and still listed.
            spec(
                "ml/mistral",
                f"127.0.0.1:{free_port()}",
                ready=False,
                models=("mistral-7b",),
                path_prefix=None,
            ),
        )
        async with running_activator(source, settings()) as act:
            base = f"http://127.0.0.1:{act.data_port}"
            async with client.get(f"{base}/v1/models") as resp:
                assert resp.status == 200
                body = await resp.json()
            assert [m["id"] for m in body["data"]] == ["llama-3-8b", "mistral-7b"]
            sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
            try:
                listed = [m.id async for m in sdk.models.list()]
            finally:
                await sdk.close()
            assert listed == ["llama-3-8b", "mistral-7b"]
            async with client.head(f"{base}/v1/models") as resp:
                assert resp.status == 200
                assert await resp.read() == b""
        assert warm.received == []
    finally:
        await warm.stop()


async def test_one_model_retrieved_as_openai_defines_it(client: aiohttp.ClientSession) -> None:
    source = StaticSource(
        spec(
            "ml/llama",
            f"127.0.0.1:{free_port()}",
            ready=False,
            models=("llama-3-8b", "meta-llama/Llama-3.1-8B"),
            path_prefix=None,
        )
    )
    async with running_activator(source, settings()) as act:
        base = f"http://127.0.0.1:{act.data_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        try:
            got = await sdk.models.retrieve("llama-3-8b")
            assert (got.id, got.object, got.owned_by) == ("llama-3-8b", "model", "ml/llama")
            assert (await sdk.models.retrieve("meta-llama/Llama-3.1-8B")).id == (
                "meta-llama/Llama-3.1-8B"
            )
            with pytest.raises(openai.NotFoundError) as missing:
                await sdk.models.retrieve("gpt-4")
        finally:
            await sdk.close()
        assert "'gpt-4' is not served here" in str(missing.value)


async def test_a_path_route_still_claims_v1_models(client: aiohttp.ClientSession) -> None:
    backend = await Backend(name="owner").start()
    try:
        source = StaticSource(
            spec("ml/all", backend.endpoint, path_prefix="/"),
            spec("ml/named", f"127.0.0.1:{free_port()}", models=("m",), path_prefix=None),
        )
        async with (
            running_activator(source, settings()) as act,
            client.get(f"http://127.0.0.1:{act.data_port}/v1/models") as resp,
        ):
            assert resp.status == 200
            assert (await resp.json())["backend"] == "owner"
    finally:
        await backend.stop()


@pytest.mark.parametrize(
    ("body", "status", "code", "words"),
    [
        pytest.param(
            b'{"model": "gpt-4", "prompt": "hi"}',
            404,
            "no_target",
            ["'gpt-4'", "'llama-3-8b'"],
            id="unknown-model",
        ),
        pytest.param(b'{"prompt": "hi"}', 400, "bad_model", ["has no 'model'"], id="no-model"),
        pytest.param(
            b'{"model": 7}', 400, "bad_model", ["non-empty string", "got a number"], id="number"
        ),
        pytest.param(b"[1, 2]", 400, "body_not_object", ["got a list"], id="not-an-object"),
        pytest.param(
            b'{"model": "llama-3-8b", "messages": [{"role": "user"',
            400,
            "invalid_json",
            ["not JSON: Expecting ',' delimiter at line 1, column 53 (character 52)"],
            id="unclosed",
        ),
        pytest.param(
            b"{'model': 'llama-3-8b'}",
            400,
            "invalid_json",
            ["Expecting property name enclosed in double quotes", "column 2"],
            id="single-quoted",
        ),
    ],
)
async def test_model_errors_say_what_was_wrong(
    client: aiohttp.ClientSession,
    body: bytes,
    status: int,
    code: str,
    words: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="activator")
    source = StaticSource(
        spec("ml/llama", f"127.0.0.1:{free_port()}", models=("llama-3-8b",), path_prefix=None)
    )
    async with (
        running_activator(source, settings()) as act,
        client.post(
            f"http://127.0.0.1:{act.data_port}/v1/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        ) as resp,
    ):
        assert resp.status == status
        error = (await resp.json())["error"]
    assert error["code"] == code
    for word in words:
        assert word in error["message"]
    # The activator's log says it too, as the client was told.
    assert f"refused {status} {code} (target -): {error['message']}" in caplog.messages
