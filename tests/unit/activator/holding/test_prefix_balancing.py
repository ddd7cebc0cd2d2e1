"""Prefix balancing on the activator's side: prompt blocks, the gate, the configuration.

Covers: a chat's next turn serializes to blocks that extend the last turn's,
with the same anchor, while another conversation behind the same system
prompt gets another anchor; bodies without a prompt give no blocks; a target
with ``prefix`` balancing sends a conversation's turns to one replica among
four, and with the default it balances by load; each prefix pick is counted
by outcome in ``tidal_activator_prefix_routes_total`` (ring for a first turn,
history for the next, spilled when its replica is over the load bound,
no-prompt without blocks; a held request once) and a gate balanced by load
has no series; the registry and the routes file carry ``balancing`` to the
target and refuse an unknown mode by name. The same parsed body gives the
token estimate a model with a TTFT objective reports (chat, completion and
token-id prompts, ``max_tokens``); a Deployment with
``autoscaling.tidal.dev/slo-ttft`` makes its target count them, and only then.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from activator.balancing.prefix_key import (
    BLOCK_CHARS,
    PromptBlocks,
    estimated_tokens,
    prompt_blocks,
)
from activator.holding.gate import ColdStartTimeout
from activator.holding.scaler_word import ScalerWord
from activator.holding.target import Target
from activator.kube.translate import target_from_deployment
from activator.metrics import PREFIX, Metrics
from activator.routing.registry import Registry
from activator.routing.routes_file import parse_routes
from activator.targets import Discovered, Endpoint, TargetSpec

SYSTEM = {"role": "system", "content": "You are a careful assistant. " * 20}


def turns(topic: str, count: int) -> list[list[dict[str, str]]]:
    """The messages of each turn of one conversation (each a few blocks long)."""
    messages: list[dict[str, str]] = [SYSTEM]
    out = []
    for k in range(count):
        messages = [*messages, {"role": "user", "content": f"{topic} question {k}: " + "x" * 600}]
        out.append(messages)
        messages = [*messages, {"role": "assistant", "content": f"answer {k} " + "y" * 700}]
    return out


def test_a_next_turn_extends_the_last_turns_blocks_with_the_same_anchor() -> None:
    first, second = (prompt_blocks({"messages": m}) for m in turns("rust", 2))
    assert first.blocks and second.blocks[: len(first.blocks)] == first.blocks
    assert len(second.blocks) > len(first.blocks)
    # The system message ("system", its text, two separators) and one block more.
    system_chars = len("system") + len(SYSTEM["content"]) + 2
    assert first.anchor == second.anchor == system_chars // BLOCK_CHARS + 1
    other = prompt_blocks({"messages": turns("go", 1)[0]})
    # Same system prompt: the leading blocks agree; the anchor (one block into
    # the conversation) does not.
    assert other.blocks[: other.anchor - 1] == first.blocks[: first.anchor - 1]
    assert other.blocks[: other.anchor] != first.blocks[: first.anchor]


@pytest.mark.parametrize(
    "document",
    [[], {"model": "m"}, {"messages": ["not a message"]}, {"prompt": 3}, {"prompt": "short"}],
)
def test_bodies_without_a_usable_prompt_give_no_blocks(document: object) -> None:
    assert prompt_blocks(document).blocks == ()


def test_a_completion_prompt_is_cut_into_full_blocks() -> None:
    text = "a" * (3 * BLOCK_CHARS + 10)
    assert len(prompt_blocks({"prompt": text}).blocks) == 3
    assert prompt_blocks({"prompt": [text]}).blocks == prompt_blocks({"prompt": text}).blocks


ENDPOINTS = [Endpoint(f"10.0.0.{i}", 80, name=f"pod-{i}", ready=True) for i in range(1, 5)]


def _body(messages: list[dict[str, str]]) -> object:
    """A request body as the proxy hands it over: parsed once, to route by ``model``."""
    return json.loads(json.dumps({"model": "m", "messages": messages}))


def _prompt(target: Target, messages: list[dict[str, str]]) -> PromptBlocks | None:
    """What the target balances a request with ``messages`` by (and counts its arrival)."""
    return target.arrive(_body(messages))[0]


def _target(name: str = "ns/t", *, activators: int = 1, **kw: Any) -> Target:
    word = ScalerWord()
    word.hear_activators(activators)
    target = Target(TargetSpec(name=name, max_buffered=10, **kw), word=word, clock=lambda: 0.0)
    target.set_endpoints(ENDPOINTS)
    return target


def _prefixed(**kw: Any) -> Target:
    return _target(balancing="prefix", **kw)


def test_a_prefix_target_keeps_a_conversation_on_one_replica() -> None:
    target = _prefixed()
    for topic in ("rust", "go", "sql", "css", "bash", "c"):
        where = set()
        for messages in turns(topic, 4):
            tracker = target.try_take(_prompt(target, messages))
            assert tracker is not None
            where.add(tracker.key)
            target.give_back(tracker)
        assert len(where) == 1, topic


def test_each_activator_records_its_share_of_a_replicas_cache() -> None:
    target = _prefixed(activators=2)
    prefix = target.prefix
    assert prefix is not None
    whole = prefix.router.config.capacity_blocks
    assert prefix.router.index.capacity == whole // 2
    target.word.hear_activators(4)
    target.configure()  # the registry tells it the scaler's word changed
    assert target.prefix is prefix  # the same record, resized
    assert prefix.router.index.capacity == whole // 4


def test_prefix_picks_are_counted_by_outcome_and_a_load_gate_counts_none() -> None:
    prefixed = _prefixed()
    by_load = _target("ns/plain")
    registry = CollectorRegistry()
    Metrics(registry, targets=lambda: {"ns/t": prefixed, "ns/plain": by_load})

    def routes(outcome: str, target: str = "ns/t") -> float | None:
        labels = {"target": target, "outcome": outcome}
        return registry.get_sample_value(PREFIX + "prefix_routes_total", labels)

    def send(messages: list[dict[str, str]] | None, to: Target = prefixed) -> str:
        tracker = to.try_take(_prompt(to, messages) if messages else None)
        assert tracker is not None
        to.give_back(tracker)
        return tracker.key

    topics = {topic: turns(topic, 3) for topic in ("rust", "go", "sql")}
    homes = {topic: send(chat[0]) for topic, chat in topics.items()}
    for chat in topics.values():
        send(chat[1])
    send(None)
    send(topics["rust"][0], to=by_load)
    assert (routes("ring"), routes("history"), routes("no-prompt")) == (3, 3, 1)
    # Rust's replica far over the mean: its next turn goes elsewhere, counted as a spill.
    home = next(t for t in prefixed.gate.endpoints.ready if t.key == homes["rust"])
    home.in_flight += 10
    assert send(topics["rust"][2]) != homes["rust"]
    assert (routes("spilled"), routes("history"), routes("least-loaded")) == (1, 3, 0)
    assert routes("ring", "ns/plain") is None


async def test_a_held_request_is_counted_once() -> None:
    target = Target(TargetSpec(name="ns/t", max_buffered=10, balancing="prefix"), clock=lambda: 0.0)
    assert target.prefix is not None
    assert target.try_take(_prompt(target, turns("rust", 1)[0])) is None
    with pytest.raises(ColdStartTimeout):
        await target.gate.acquire(0.01)  # the proxy's next step: hold it
    assert target.prefix.routes["held"] == 1
    assert sum(target.prefix.routes.values()) == 1


def test_the_default_target_reads_no_prompt() -> None:
    target = _target()
    assert target.prefix is None
    assert _prompt(target, turns("rust", 1)[0]) is None


def test_the_registry_hands_the_target_its_balancing() -> None:
    registry = Registry()
    registry.apply(
        {"ns/t": Discovered(TargetSpec(name="ns/t", balancing="prefix"), tuple(ENDPOINTS))}
    )
    assert registry.targets["ns/t"].prefix is not None
    registry.apply({"ns/t": Discovered(TargetSpec(name="ns/t"), tuple(ENDPOINTS))})
    assert registry.targets["ns/t"].prefix is None


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 32}, (104, 32)),
        (  # text parts count, an image by URL does not; two messages, two templates
            {
                "messages": [
                    {"role": "system", "content": "y" * 80},
                    {"role": "user", "content": [{"type": "text", "text": "z" * 40},
                                                 {"type": "image_url", "image_url": {"url": "u"}}]},
                ],
                "max_completion_tokens": 7,
            },
            (38, 7),
        ),
        ({"prompt": "w" * 1000}, (250, 0)),
        ({"prompt": ["a" * 8, "b" * 8], "max_tokens": 0}, (4, 0)),
        ({"prompt": [1, 2, 3], "max_tokens": True}, (3, 0)),
        ([1, 2], (0, 0)),
    ],
)  # fmt: skip
def test_a_body_gives_its_estimated_prompt_tokens_and_max_tokens(
    document: object, expected: tuple[int, int]
) -> None:
    assert estimated_tokens(document) == expected


def test_only_a_model_with_a_ttft_objective_counts_tokens() -> None:
    def target_for(annotations: dict[str, str]) -> Target:
        notes = {"routing.tidal.dev/models": "m", **annotations}
        deployment = {"metadata": {"name": "m", "namespace": "ns", "annotations": notes}}
        registry = Registry()
        registry.apply({"ns/m": Discovered(target_from_deployment(deployment).spec)})
        return registry.targets["ns/m"]

    body = {"model": "m", "prompt": "x" * 400, "max_tokens": 9}
    counted = target_for({"autoscaling.tidal.dev/slo-ttft": "2s"})
    plain = target_for({})
    for target in (counted, plain):
        target.arrive(body)
        target.arrive(body)
    none = [0] * 8
    assert counted.tokens.take() == (200, 18, none)
    assert counted.tokens.take() == (0, 0, none)
    assert plain.tokens.take() == (0, 0, none)
    assert plain.gate.arrivals == counted.gate.arrivals == 2
    # A prompt of about 6,000 tokens counts over the bounds it passes.
    counted.arrive({"model": "m", "prompt": "x" * 24_000, "max_tokens": 9})
    assert counted.tokens.take() == (6_000, 9, [1, 1, 1, 0, 0, 0, 0, 0])


def test_the_routes_file_reads_balancing_and_names_what_is_allowed() -> None:
    specs = parse_routes("targets:\n  - name: ns/t\n    balancing: prefix\n")
    assert specs["ns/t"].spec.balancing == "prefix"
    with pytest.raises(ValueError, match="balancing must be one of least-loaded, prefix"):
        parse_routes("targets:\n  - name: ns/t\n    balancing: sticky\n")
