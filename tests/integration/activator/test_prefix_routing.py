"""Prefix balancing over loopback: two activators, four replicas, multi-turn chats.

Covers: with ``balancing: prefix`` every turn of a conversation reaches one
replica whichever of two independent activators it goes through (they share
nothing; the ring over the replicas' addresses makes them agree), while the
same traffic with the default balancing spreads a conversation's turns.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import aiohttp

from tests.integration.activator.helpers import (
    Backend,
    StaticSource,
    running_activator,
    settings,
    spec,
)

TOPICS = ("rust", "go", "sql", "css", "bash", "perl", "lisp", "ada")


def _turn(topic: str, k: int) -> dict[str, Any]:
    messages: list[dict[str, str]] = [{"role": "system", "content": "Be brief. " * 40}]
    for i in range(k + 1):
        messages.append({"role": "user", "content": f"{topic} question {i} " + "q" * 400})
        if i < k:
            messages.append({"role": "assistant", "content": f"{topic} answer {i} " + "a" * 500})
    return {"model": "m", "messages": messages}


async def _replicas_per_conversation(
    client: aiohttp.ClientSession, balancing: str | None
) -> dict[str, set[str]]:
    backends = [await Backend(name=f"r{i}").start() for i in range(4)]
    extra: dict[str, Any] = {"balancing": balancing} if balancing else {}
    source = StaticSource(
        spec("ml/m", *(b.endpoint for b in backends), models=("m",), path_prefix=None, **extra)
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            activators = [
                await stack.enter_async_context(running_activator(source, settings()))
                for _ in range(2)
            ]
            for k in range(4):
                for n, topic in enumerate(TOPICS):
                    act = activators[(k + n) % 2]  # turns alternate between the activators
                    url = f"http://127.0.0.1:{act.data_port}/v1/chat/completions"
                    async with client.post(url, json=_turn(topic, k)) as resp:
                        assert resp.status == 200
                        await resp.read()
    finally:
        for b in backends:
            await b.stop()
    where: dict[str, set[str]] = {t: set() for t in TOPICS}
    for b in backends:
        for body in b.bodies:
            first_user = json.loads(body)["messages"][1]["content"]
            where[first_user.split()[0]].add(b.name)
    return where


async def test_two_activators_keep_each_conversation_on_one_replica(
    client: aiohttp.ClientSession,
) -> None:
    where = await _replicas_per_conversation(client, "prefix")
    assert all(len(replicas) == 1 for replicas in where.values()), where
    # ... and the conversations are spread, not piled on one replica.
    assert len(set().union(*where.values())) >= 2


async def test_least_loaded_spreads_a_conversations_turns(
    client: aiohttp.ClientSession,
) -> None:
    where = await _replicas_per_conversation(client, None)
    assert any(len(replicas) > 1 for replicas in where.values()), where
