"""vLLM's KV events applied to the block index: exact mode, malformed batches, the engine's feed.

Pure: replica names and block ids are strings, the events are the lists
vLLM's msgpack decodes to.
"""

from __future__ import annotations

import pytest

from activator.balancing.block_index import BlockIndex
from simulator.engine import KvEventRecorder, LlmEngine, LlmParams
from simulator.kv_events import apply_batch, batch, block_removed, block_stored


def test_events_make_a_replica_exact_and_what_it_is_sent_no_longer_counts() -> None:
    index = BlockIndex(capacity=2)
    apply_batch(index, "a", batch(1.0, [block_stored(["s", "d1", "d2"], None, 16)]))
    assert index.is_exact("a")
    index.sent("a", ["other"])  # the replica says what it stores, not the router
    assert index.matches(["s", "d1", "d2"], ["a"]) == {"a": 3}  # no ageing at capacity
    apply_batch(index, "a", batch(2.0, [block_removed(["d2"])]))
    assert index.matches(["s", "d1", "d2"], ["a"]) == {"a": 2}
    apply_batch(index, "a", [3.0, [["AllBlocksCleared"]]])  # the rank may be absent
    assert index.held("a") == 0 and index.is_exact("a")
    index.drop("a")
    assert not index.is_exact("a")


@pytest.mark.parametrize(
    ("decoded", "message"),
    [
        ({"events": []}, "a KV event batch is"),
        ([1.0, ["BlockStored"]], "expected \\[tag, fields...\\]"),
        ([1.0, [["BlockStored"]]], "unknown or short event"),
        ([1.0, [["BlockMoved", []]]], "known: BlockStored, BlockRemoved, AllBlocksCleared"),
        ([1.0, [["BlockRemoved", "d1"]]], "block_hashes must be a list"),
    ],
)
def test_a_malformed_batch_is_refused_by_name(decoded: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        apply_batch(BlockIndex(capacity=10), "a", decoded)


def _drain(engine: LlmEngine, now: float) -> float:
    """Run the engine until it is idle; the time it ends."""
    while engine.has_work:
        plan = engine.begin_step(now)
        assert plan is not None
        now = plan.end_s
        engine.end_step()
    return now


def test_the_engine_publishes_what_its_cache_stores_and_evicts() -> None:
    # A cache of 128 tokens in 16-token blocks: eight blocks, less the running KV.
    engine = LlmEngine(LlmParams(kv_cache_tokens=128, prefix_block_tokens=16))
    engine.kv.events = recorder = KvEventRecorder(16)
    index = BlockIndex(capacity=1)
    engine.add(1, prompt_tokens=40, output_tokens=1, now=0.0, prefix=("a", "b"))
    now = 0.0
    now = _drain(engine, now)
    apply_batch(index, "r", batch(now, recorder.take()))
    assert index.matches(["a", "b"], ["r"]) == {"r": 2}
    engine.add(2, prompt_tokens=60, output_tokens=1, now=now, prefix=("x", "y", "z"))
    now = _drain(engine, now)
    events = recorder.take()
    assert any(e[0] == "BlockRemoved" for e in events)
    apply_batch(index, "r", batch(now, events))
    assert index.matches(["a", "b"], ["r"]) == {}
    assert recorder.take() == []
    engine.kv.reset_prefix_cache()
    assert recorder.take() == [["AllBlocksCleared"]]
