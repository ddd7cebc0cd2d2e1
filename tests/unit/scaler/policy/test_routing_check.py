"""The scaler's check of ``routing.tidal.dev/*`` agrees with the activator, which routes.

Covers: a misspelt key is named with the closest known key; bad values name key,
value and what is allowed; other prefixes are not this check's business; the
keys are the activator's, and over the same values both sides find the same
keys bad.
"""

from __future__ import annotations

import re

import pytest

from activator.kube.translate import ROUTING_ANNOTATIONS, target_from_deployment
from scaler.policy.routing_check import ROUTING_KEYS, routing_problems

R = "routing.tidal.dev/"


def test_a_misspelt_key_is_named_with_the_known_ones() -> None:
    (problem,) = routing_problems({R + "model": "llama", "autoscaling.tidal.dev/window": "x"})
    assert problem.key == R + "model"
    text = str(problem)
    assert 'routing.tidal.dev/model: "llama" is not a known key, ignored' in text
    assert f"did you mean {R}models?" in text and "docs/annotations.md" in text


def test_the_keys_are_the_activators() -> None:
    assert set(ROUTING_KEYS) == {a.key for a in ROUTING_ANNOTATIONS}


@pytest.mark.parametrize(
    "annotations",
    [
        {R + "cold-start-timeout": "5x", R + "max-buffered": "-1"},
        {R + "cold-start-timeout": "2h", R + "container-concurrency": "10001"},
        {R + "cold-start-timeout": "500ms", R + "port": "0", R + "path-prefix": "v1"},
        {R + "max-buffered": "1.5", R + "container-concurrency": "abc", R + "port": "70000"},
        {R + "cold-start-timeout": "90s", R + "max-buffered": "100000", R + "port": "http"},
        {R + "container-concurrency": "0", R + "path-prefix": "/v1", R + "hosts": "a,b"},
        {R + "balancing": "prefix", R + "max-buffered": "10"},
        {R + "balancing": "round-robin"},
        {R + "model": "llama", R + "max-buferd": "3"},
        {R + "default-priority": "urgent", R + "shed-at-zero": "yes"},
        {R + "default-priority": "1000001", R + "shed-at-zero": "True"},
        {R + "default-priority": "sheddable", R + "max-buffered": "10"},
        {R + "default-priority": "-40"},
        {R + "adapters": "sql=/models/sql, chat=org/chat-lora"},
        {R + "adapters": "sql"},
        {R + "adapters": "sql=a, sql=b"},
        {R + "adapters": "s ql=a"},
        {R + "adapters": "sql=/a b"},
        {R + "adapters": " , "},
    ],
)
def test_both_sides_find_the_same_keys_bad(annotations: dict[str, str]) -> None:
    ours = {p.key for p in routing_problems(annotations)}
    deployment = {"metadata": {"name": "llama", "namespace": "ml", "annotations": annotations}}
    theirs = {
        R + m.group(1)
        for text in target_from_deployment(deployment).problems
        for m in [re.search(r"routing\.tidal\.dev/([a-z-]+)=", text)]
        if m is not None
    }
    assert ours == theirs
