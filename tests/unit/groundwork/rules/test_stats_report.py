"""The ``POST /v1/stats`` report as both sides see it (groundwork.rules.stats_report).

Covers: a report with every field set is written by the activator's writer
and read back equal by the scaler's reader, and one with only the four
counts stays that small on the wire; a target key must be
``namespace/name``; every malformed body is refused whole, with an error
that names the field and what is allowed. The scaler's answer, as its
writer (the scaler's) writes it and its reader (the activator's) reads it:
every field back as written, and what an answer cannot say read as unsaid.
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS
from groundwork.rules.stats_report import (
    ActivatorReport,
    ReportError,
    ScalerAnswer,
    ShapeRoute,
    TargetStats,
    answer_json,
    is_target_key,
    parse_answer,
    parse_report,
    report_json,
)

EVERY_FIELD = TargetStats(
    concurrency=3.25,
    in_flight=3,
    buffered=1,
    arrivals=57,
    pods={"pod-a": 2, "pod-b": 1},
    prompt_tokens=4000,
    output_tokens=900,
    first_tokens=12,
    prefilled_tokens=3800,
    awaiting_first_token=2,
    best_prefill_tokens_per_s=12500.5,
    held_critical=1,
    held_standard=2,
    held_sheddable=3,
    shed=4,
    adapter_refusals=("pod-a refused sql: 503",),
    prompts_over=tuple(range(len(PROMPT_SIZE_BOUNDS), 0, -1)),
)


def test_every_field_is_written_and_read_back() -> None:
    defaults = TargetStats(concurrency=0.0, in_flight=0, buffered=0, arrivals=0)
    unset = [
        f.name
        for f in fields(TargetStats)
        if getattr(EVERY_FIELD, f.name) == getattr(defaults, f.name)
    ]
    assert unset == [], "the sample report sets every field"
    report = ActivatorReport(activator="act-1", period_s=1.0, targets={"ml/llama": EVERY_FIELD})
    assert parse_report(report_json(report)) == report


def test_a_plain_report_carries_only_the_counts() -> None:
    plain = TargetStats(concurrency=1.0, in_flight=1, buffered=0, arrivals=2)
    body = report_json(ActivatorReport(activator="a", period_s=1.0, targets={"ml/m": plain}))
    assert body["targets"]["ml/m"] == {
        "concurrency": 1.0, "in_flight": 1, "buffered": 0, "arrivals": 2, "pods": {},
    }  # fmt: skip
    assert parse_report(body).targets["ml/m"] == plain


@pytest.mark.parametrize(
    ("key", "ok"),
    [("ml/llama", True), ("a/b", True), ("nons", False), ("a/b/c", False), ("/b", False),
     ("a/", False), (3, False)],
)  # fmt: skip
def test_a_target_key_is_namespace_slash_name(key: object, ok: bool) -> None:
    assert is_target_key(key) is ok


def report(name: str, targets: dict[str, dict[str, object]], period_s: float = 1.0) -> object:
    return {"activator": name, "period_s": period_s, "targets": targets}


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        pytest.param([], "expected a JSON object", id="not-object"),
        pytest.param({"targets": {}}, "activator", id="no-activator"),
        pytest.param(report("x" * 254, {}), "<= 253 chars", id="long-activator"),
        pytest.param(report("a", {"nons": {}}), "namespace/name", id="bad-key"),
        pytest.param(report("a", {"d/m": []}), r"targets\[d/m\]: expected an object", id="target"),
        pytest.param(report("a", {"d/m": {"buffered": -1}}), "buffered", id="negative"),
        pytest.param(report("a", {"d/m": {"in_flight": 1.5}}), "whole number", id="fraction"),
        pytest.param(report("a", {"d/m": {"concurrency": True}}), "number", id="bool"),
        pytest.param(report("a", {"d/m": {"shed": "2"}}), r"\.shed: expected a number", id="str"),
        pytest.param(report("a", {}, period_s=0), "period_s", id="period"),
        pytest.param(report("a", {"d/m": {"pods": []}}), "pods", id="pods-shape"),
        pytest.param(
            report("a", {"d/m": {"prompts_over": [1, 2]}}), "one per prompt size", id="sizes"
        ),
        pytest.param(
            report("a", {"d/m": {"adapter_refusals": "no"}}), "list of strings", id="refusals"
        ),
    ],
)
def test_a_malformed_report_is_refused_naming_the_field(payload: object, fragment: str) -> None:
    with pytest.raises(ReportError, match=fragment):
        parse_report(payload)


def test_a_report_is_bounded() -> None:
    many = report("a", {f"d/m{i}": {} for i in range(4)})
    with pytest.raises(ReportError, match="at most 3 per report"):
        parse_report(many, max_targets=3)
    refusals = report("a", {"d/m": {"adapter_refusals": ["x" * 600] * 20}})
    kept = parse_report(refusals).targets["d/m"].adapter_refusals
    assert len(kept) == 10 and {len(r) for r in kept} == {500}


@pytest.mark.parametrize(
    "answer",
    [
        ScalerAnswer(leader=True, activators=2, sleeping={"ml/a": ("10.0.0.1:8000",), "ml/b": ()}),
        ScalerAnswer(leader=True, activators=1, sleeping={}),
        ScalerAnswer(leader=False, activators=3),
        ScalerAnswer(leader=True, target="ml/a", sleeping={"ml/a": ("10.0.0.1:8000",)}),
        ScalerAnswer(leader=False, target="ml/a"),
        ScalerAnswer(
            leader=True,
            activators=1,
            shapes={
                "ml/a": {
                    "10.0.0.1:8000": ShapeRoute("h100", 1.0, 8000.0),
                    "10.0.0.2:8000": ShapeRoute("mig-3g.40gb", 0.43),
                }
            },
        ),
    ],
    ids=[
        "leader",
        "leader-nothing-sleeps",
        "follower",
        "activation",
        "activation-follower",
        "shapes",
    ],
)
def test_an_answer_is_read_as_the_scaler_wrote_it(answer: ScalerAnswer) -> None:
    assert parse_answer(answer_json(answer)) == answer


@pytest.mark.parametrize(
    ("payload", "read"),
    [
        ("not an object", ScalerAnswer(leader=False)),
        ({"activators": 0, "leader": True}, ScalerAnswer(leader=True)),
        ({"activators": "2"}, ScalerAnswer(leader=False)),
        ({"activators": True}, ScalerAnswer(leader=False)),
        ({"leader": "true", "sleeping": {"ml/a": ["x"]}}, ScalerAnswer(leader=False)),
        ({"activators": 2, "sleeping": {"ml/a": ["x"]}}, ScalerAnswer(leader=False, activators=2)),
        (
            {"leader": True, "sleeping": {"ml/a": "x", "ml/b": [1]}},
            ScalerAnswer(leader=True, sleeping={"ml/b": ("1",)}),
        ),
        ({"leader": True, "sleeping": ["ml/a"]}, ScalerAnswer(leader=True)),
        (
            {
                "leader": True,
                "shapes": {
                    "ns/m": {
                        "10.0.0.1:8000": {"shape": "h100", "weight": 1.0, "reach": 8000},
                        "10.0.0.2:8000": {"shape": "l4", "weight": 0, "reach": 10},
                        "10.0.0.3:8000": {"shape": "a100", "weight": 0.5, "reach": None},
                        "10.0.0.4:8000": {"shape": 3, "weight": 0.5},
                        "10.0.0.5:8000": {"shape": "l4", "weight": True},
                        "10.0.0.6:8000": {"shape": "l4", "weight": 1.0, "reach": -1},
                    },
                    "ns/empty": {},
                    "ns/bad": ["not", "a", "map"],
                },
            },
            ScalerAnswer(
                leader=True,
                shapes={
                    "ns/m": {
                        "10.0.0.1:8000": ShapeRoute("h100", 1.0, 8000.0),
                        "10.0.0.3:8000": ShapeRoute("a100", 0.5, None),
                    }
                },
            ),
        ),
        ({"shapes": {"ns/m": {"x:1": {"shape": "h100", "weight": 1}}}}, ScalerAnswer(False)),
    ],
    ids=[
        "not-an-object",
        "no-activators",
        "count-as-text",
        "count-as-bool",
        "leader-as-text",
        "a-follower-lists-no-sleeps",
        "bad-lists-left-out",
        "sleeping-not-an-object",
        "malformed-shapes-left-out",
        "a-follower-names-no-shapes",
    ],
)
def test_what_an_answer_cannot_say_is_read_as_unsaid(payload: object, read: ScalerAnswer) -> None:
    assert parse_answer(payload) == read
