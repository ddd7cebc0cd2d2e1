"""A model on two GPU shapes through a real activator, the scaler's word over loopback.

Covers: once the leading scaler's stats answer names each endpoint's shape,
weight and reach, every prompt only the whole GPU prefills in time reaches
the whole GPU, while short prompts go to both, the whole GPU taking the
larger share; a leader's answer without shapes puts the model back on
balancing by load.
"""

from __future__ import annotations

import asyncio

import aiohttp

from groundwork.rules.stats_report import ShapeRoute
from tests.integration.activator.helpers import (
    Backend,
    FakeScaler,
    StaticSource,
    running_activator,
    settings,
    spec,
    wait_until,
)


async def test_long_prompts_reach_the_whole_gpu_and_short_ones_follow_capacity(
    client: aiohttp.ClientSession,
) -> None:
    whole = await Backend(name="whole", delay_s=0.2).start()
    piece = await Backend(name="slice", delay_s=0.2).start()
    word = {
        "ml/m": {
            whole.endpoint: ShapeRoute("h100", 1.0, 8000),
            piece.endpoint: ShapeRoute("mig-3g.40gb", 0.3, 2000),
        }
    }
    scaler = await FakeScaler(shapes=word).start()
    source = StaticSource(
        spec("ml/m", whole.endpoint, piece.endpoint, models=("m",), path_prefix=None)
    )
    try:
        async with running_activator(source, settings(scaler)) as act:
            target = act.registry.targets["ml/m"]
            await wait_until(lambda: target.shapes is not None)
            url = f"http://127.0.0.1:{act.data_port}/v1/completions"

            async def post(prompt: str) -> None:
                async with client.post(url, json={"model": "m", "prompt": prompt}) as resp:
                    assert resp.status == 200
                    await resp.read()

            await asyncio.gather(*(post("x" * 4 * 5000) for _ in range(8)))
            assert (len(whole.received), len(piece.received)) == (8, 0)
            await asyncio.gather(*(post(f"short {i}") for i in range(40)))
            short_whole, short_piece = len(whole.received) - 8, len(piece.received)
            assert short_piece > 0 and short_whole > short_piece
            scaler.shapes = None
            scaler.sleeping = {}  # still the leader, now with no model on shapes
            await wait_until(lambda: target.shapes is None)
    finally:
        await scaler.stop()
        await whole.stop()
        await piece.stop()
