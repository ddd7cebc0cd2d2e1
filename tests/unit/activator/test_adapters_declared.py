"""Declared LoRA adapters: the annotation and the ConfigMap (groundwork.rules, kube.translate).

Covers: ``name=source`` lists and ConfigMap data parse to the same adapters;
each bad form is refused naming what is allowed; the Deployment's
annotations (with a ConfigMap, a missing one, a bad keep-alive).
"""

from __future__ import annotations

import pytest

from activator.kube.translate import target_from_deployment
from activator.targets import Adapter
from groundwork.rules.routing_keys import ADAPTERS, adapter_pairs


def test_the_annotation_and_the_configmap_say_the_same() -> None:
    expected = (Adapter("chat", "org/chat-lora"), Adapter("sql", "/models/sql"))
    assert ADAPTERS.parse(" sql=/models/sql, chat=org/chat-lora ,") == expected
    assert adapter_pairs({"sql": "/models/sql", "chat": "org/chat-lora"}) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sql", "'sql' is not name=source"),
        ("sql=a, sql=b", "'sql' is declared twice"),
        ("-sql=a", "adapter name '-sql' is not allowed"),
        ("sql=", "adapter 'sql' needs a source"),
        ("sql=a b", "adapter 'sql' needs a source"),
        (" , ", "the list is empty"),
    ],
)
def test_bad_lists_are_refused_naming_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ADAPTERS.parse(text)
    routing = target_from_deployment(_deployment(**{ADAPTERS.name: text}))
    (problem,) = routing.problems
    assert message in problem.replace('"', "'")
    assert routing.spec.adapters == ()


def test_an_adapter_named_as_the_model_is_refused() -> None:
    routing = target_from_deployment(
        _deployment(**{ADAPTERS.name: "llama=org/x", "routing.tidal.dev/models": "llama"})
    )
    (problem,) = routing.problems
    assert "no adapter named as a model (llama)" in problem
    assert routing.spec.adapters == ()
    with pytest.raises(ValueError, match="has the name of the base model"):
        adapter_pairs({"llama": "org/x"}, base_models=("llama",))


def _deployment(**notes: str) -> dict[str, object]:
    return {"metadata": {"namespace": "ml", "name": "llama", "annotations": notes}}


def test_the_deployment_declares_adapters_and_their_keep_alive() -> None:
    d = _deployment(
        **{
            "routing.tidal.dev/models": "llama",
            "routing.tidal.dev/adapters": "sql=org/sql",
            "routing.tidal.dev/adapters-configmap": "many",
            "autoscaling.tidal.dev/adapter-keep-alive": "30s",
        }
    )
    routing = target_from_deployment(d, {"ml/many": {"data": {"a1": "org/a1", "sql": "other"}}})
    assert routing.problems == ()
    assert routing.spec.adapters == (Adapter("a1", "org/a1"), Adapter("sql", "org/sql"))
    assert routing.spec.adapter_keep_alive_s == 30.0
    missing = target_from_deployment(d)
    assert "no ConfigMap ml/many" in missing.problems[0]
    assert missing.spec.adapters == (Adapter("sql", "org/sql"),)
    bad = target_from_deployment(_deployment(**{"autoscaling.tidal.dev/adapter-keep-alive": "2d"}))
    assert bad.spec.adapter_keep_alive_s == 600.0  # the default; the scaler raises the Event
