"""The fake vLLM's KV-cache events: what its prefix cache stores and evicts.

vLLM started with ``--kv-events-config '{"enable_kv_cache_events": true,
...}'`` publishes each change to its prefix cache as ``BlockStored``,
``BlockRemoved`` and ``AllBlocksCleared`` events, in batches, on a ZMQ PUB
socket (multipart ``[topic, sequence number, msgpack payload]``). The fake
takes the same flag and records the same events from its engine model
(:class:`simulator.engine.KvEventRecorder`), in the same layout
(a batch is ``[ts, [event, ...], data_parallel_rank]``, an event
``[tag, fields...]``: what vLLM's msgpack decodes to, see
:mod:`simulator.kv_events`), but serves them over HTTP, since the
sandbox has no ZMQ: ``GET /kv_events?after=SEQ`` answers ``{"next": SEQ,
"batches": [[seq, batch], ...]}``, every batch after ``after``, so that
several subscribers (one per activator) each read the whole stream. A
subscriber that fell behind the last :data:`KEPT_BATCHES` gets
``"missed": true``: its state of this server is no longer exact (vLLM has a
replay socket for this; the fake has none).

Block hashes are the fake's own chained BLAKE2b digests
(:mod:`loadtests.sandbox.servers.prompt_blocks`), sent as unsigned
integers, as vLLM sends its ``ExternalBlockHash`` values.

Main decision: events are drained from the engine when a subscriber asks,
not on every engine step, so a server nobody subscribes to does no work
beyond appending to a list that the first poll empties; the list is capped
by dropping the oldest events (a subscriber then sees ``missed``).
"""

from __future__ import annotations

import json
import time
from collections import deque

from aiohttp import web

from simulator.engine import KvEventRecorder, LlmEngine

__all__ = ["KEPT_BATCHES", "KvEventFeed", "parse_kv_events_config"]

KEPT_BATCHES = 10_000


def parse_kv_events_config(text: str | None) -> bool:
    """Whether vLLM's ``--kv-events-config`` JSON enables events; a clear error if bad."""
    if text is None:
        return False
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--kv-events-config must be JSON, got {text!r}: {e}") from e
    if not isinstance(config, dict):
        raise ValueError(f"--kv-events-config must be a JSON object, got {text!r}")
    enabled = config.get("enable_kv_cache_events", False)
    if not isinstance(enabled, bool):
        raise ValueError(f"enable_kv_cache_events must be true or false, got {enabled!r}")
    return enabled


def _wire(value: object) -> object:
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


class KvEventFeed:
    """The engine's events as numbered batches, for ``GET /kv_events``."""

    def __init__(self, engine: LlmEngine) -> None:
        self._recorder = KvEventRecorder(engine.params.prefix_block_tokens)
        engine.kv.events = self._recorder
        self._batches: deque[tuple[int, list[object]]] = deque(maxlen=KEPT_BATCHES)
        self._seq = 0

    def drain(self) -> None:
        events = self._recorder.take()
        if events:
            self._seq += 1
            self._batches.append((self._seq, [time.time(), _wire(events), 0]))

    def since(self, after: int) -> dict[str, object]:
        self.drain()
        oldest = self._batches[0][0] if self._batches else self._seq + 1
        return {
            "next": self._seq,
            "missed": after + 1 < oldest and after < self._seq,
            "batches": [[seq, batch] for seq, batch in self._batches if seq > after],
        }

    async def handle(self, request: web.Request) -> web.Response:
        raw = request.query.get("after", "0")
        try:
            after = int(raw)
        except ValueError:
            return web.json_response(
                {"error": f"after must be a batch number (an integer), got {raw!r}"}, status=400
            )
        return web.json_response(self.since(after))
