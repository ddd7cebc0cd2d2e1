"""vLLM's KV-cache events, decoded and applied to a replica's block record.

vLLM publishes what its prefix cache stores and evicts when started with
``--kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq",
...}'``: a ZMQ PUB socket sends multipart messages ``[topic, sequence
number, payload]``, the payload a msgpack-encoded ``KVEventBatch``
(``vllm.distributed.kv_events``). Its structs are ``msgspec`` arrays
(``array_like=True``), the events tagged with their class name first, so
a decoded batch is plain lists::

    [ts, [event, ...], data_parallel_rank]          # the rank may be absent
    ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
     lora_id, medium]                               # trailing fields may be absent
    ["BlockRemoved", block_hashes, medium]
    ["AllBlocksCleared"]

This module takes a batch in that decoded shape (from msgpack, or from
JSON, which the sandbox's fake vLLM serves in the same layout) and applies
it to :class:`~activator.balancing.block_index.BlockIndex` for one replica,
which from then on runs *exact* for that replica. :func:`batch` builds one,
for a server that publishes.

Main decision: a malformed event is an error naming what was wrong, not
skipped: a record that silently drifts from the cache is worse than the
approximate one it replaced. Block hashes are taken as given (``int`` or
``bytes``, vLLM's ``ExternalBlockHash``); they are useful only where they
are the router's own hashes (see :mod:`activator.balancing.block_index`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from activator.balancing.block_index import BlockIndex

__all__ = ["EVENT_TAGS", "apply_batch", "batch", "block_removed", "block_stored"]

EVENT_TAGS = ("BlockStored", "BlockRemoved", "AllBlocksCleared")


def _hashes(value: object, where: str) -> list[Hashable]:
    if not isinstance(value, list) or not all(
        isinstance(h, int | bytes | str) and not isinstance(h, bool) for h in value
    ):
        raise ValueError(f"{where}: block_hashes must be a list of ints or bytes, got {value!r}")
    return list(value)


def apply_batch(index: BlockIndex, name: str, decoded: object) -> int:
    """Apply one decoded ``KVEventBatch`` from replica ``name``; the events applied."""
    if not (isinstance(decoded, list) and len(decoded) >= 2 and isinstance(decoded[1], list)):
        raise ValueError(
            f"a KV event batch is [ts, [event, ...], (data_parallel_rank)], got {decoded!r:.200}"
        )
    for i, event in enumerate(decoded[1]):
        where = f"KV event {i} from {name}"
        if not (isinstance(event, list) and event and isinstance(event[0], str)):
            raise ValueError(f"{where}: expected [tag, fields...], got {event!r:.200}")
        tag = event[0]
        if tag == "BlockStored" and len(event) >= 2:
            index.stored(name, _hashes(event[1], where))
        elif tag == "BlockRemoved" and len(event) >= 2:
            index.removed(name, _hashes(event[1], where))
        elif tag == "AllBlocksCleared":
            index.cleared(name)
        else:
            raise ValueError(
                f"{where}: unknown or short event {event!r:.200}; known: {', '.join(EVENT_TAGS)}"
            )
    return len(decoded[1])


def block_stored(
    hashes: Sequence[Hashable], parent: Hashable | None, block_size: int
) -> list[object]:
    """A ``BlockStored`` event (no token ids: a publisher without a tokenizer has none)."""
    return ["BlockStored", list(hashes), parent, [], block_size, None, None]


def block_removed(hashes: Sequence[Hashable]) -> list[object]:
    return ["BlockRemoved", list(hashes), None]


def batch(ts: float, events: Sequence[list[object]]) -> list[object]:
    """A ``KVEventBatch`` of ``events`` at wall time ``ts`` (data-parallel rank 0)."""
    return [ts, list(events), 0]
