"""Helpers for the fake model server tests: build configs, read metrics."""

from __future__ import annotations

import dataclasses
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from loadtests.sandbox.servers.server import ServerConfig


def vllm_config(*, llm: dict[str, Any] | None = None, **overrides: Any) -> ServerConfig:
    base = ServerConfig(engine="vllm", model="m", port=0, speedup=20.0, seed=7)
    if llm:
        overrides["llm"] = dataclasses.replace(base.llm, **llm)
    return dataclasses.replace(base, **overrides)


async def scrape(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """Samples by name plus labels, e.g. ``vllm:num_requests_waiting{model_name="m"}``."""
    async with session.get(f"{url}/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}"] = s.value
    return samples
