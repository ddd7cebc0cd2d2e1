"""The shared-prefix workloads and the hit-rate ceilings.

Covers: each workload is seeded and its block ids are prefixes in the sense
the cache needs (documents share a document's blocks and nothing after it,
an agent's next step extends its last, few-shot requests share their
template); the anchor is the first segment and one block; the finite
ceiling is the infinite one with room enough, falls as the room shrinks,
and an LRU cache of one block serves nothing of prompts that alternate;
bad specs are refused by name.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from simulator.prefix_ceiling import fleet_cache_hit_rate, infinite_cache_hit_rate
from simulator.prefix_workloads import WorkloadSpec, anchor_of, generate_workload
from simulator.traces import TraceRequest


def _spec(kind: str, rate: float = 5.0) -> WorkloadSpec:
    return WorkloadSpec(kind=kind, duration_s=60.0, rate_per_s=rate, seed=3)


@pytest.mark.parametrize("kind", ["documents", "agents", "few-shot"])
def test_each_workload_is_seeded_and_full_blocks_only(kind: str) -> None:
    spec = _spec(kind, 0.5 if kind == "agents" else 5.0)
    trace = generate_workload(spec)
    assert trace and trace == generate_workload(spec)
    assert trace != generate_workload(replace(spec, seed=4))
    assert all(a.offset_s <= b.offset_s for a, b in itertools.pairwise(trace))
    for r in trace:
        assert len(r.prefix) == r.prompt_tokens // spec.block_tokens
        assert len(set(r.prefix)) == len(r.prefix)


def test_requests_over_one_document_share_it_and_nothing_after() -> None:
    trace = generate_workload(_spec("documents", 20.0))
    by_doc: dict[str, list[TraceRequest]] = {}
    for r in trace:
        doc = next(b for b in r.prefix if "doc" in str(b))
        by_doc.setdefault(str(doc).split("#")[0], []).append(r)
    shared = next(rs for rs in by_doc.values() if len(rs) > 1)
    a, b = shared[0].prefix, shared[1].prefix
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert all("'q'" not in str(x) for x in a[:common])  # the shared part is system + document
    assert anchor_of(shared[0]) == 64 // 16 + 1  # the system prompt and one block more


def test_an_agents_next_step_extends_its_last() -> None:
    trace = generate_workload(_spec("agents", 0.5))
    by_task: dict[str, list[tuple[int | str, ...]]] = {}
    for r in trace:
        by_task.setdefault(str(r.prefix[-1]).split(")")[0].split(",")[1], []).append(r.prefix)
    steps = max(by_task.values(), key=len)
    assert len(steps) > 2
    for earlier, later in itertools.pairwise(steps):
        assert later[: len(earlier)] == earlier


def test_the_finite_ceiling_is_the_infinite_one_with_room_and_falls_without() -> None:
    trace = generate_workload(_spec("documents", 20.0))
    infinite = infinite_cache_hit_rate(trace, 16)
    total = sum(len(r.prefix) for r in trace)
    assert fleet_cache_hit_rate(trace, 16, total) == pytest.approx(infinite)
    small = fleet_cache_hit_rate(trace, 16, 2_000)
    assert 0 < small < fleet_cache_hit_rate(trace, 16, 20_000) < infinite + 1e-12
    a = TraceRequest(0.0, 33, 1, prefix=("a", "a2"))
    b = TraceRequest(1.0, 33, 1, prefix=("b", "b2"))
    assert fleet_cache_hit_rate([a, b, a, b], 16, 1) == 0.0
    assert infinite_cache_hit_rate([a, b, a, b], 16) == pytest.approx(64 / 132)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kind", "rag", "unknown workload 'rag'"),
        ("rate_per_s", 0.0, "rate_per_s must be a number > 0"),
        ("block_tokens", 0, "block_tokens must be >= 1"),
    ],
)
def test_bad_specs_are_refused_by_name(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        WorkloadSpec(**{"kind": "documents", field: value})  # type: ignore[arg-type]
