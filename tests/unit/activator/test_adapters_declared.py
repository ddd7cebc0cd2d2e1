"""Declared LoRA adapters: the annotation and the ConfigMap (activator.targets, kube.translate).

Covers: ``name=source`` lists and ConfigMap data parse to the same adapters;
each bad form is refused naming what is allowed; the Deployment's
annotations (with a ConfigMap, a missing one, a bad keep-alive).
"""

from __future__ import annotations

import pytest

from activator.kube.translate import target_from_deployment
from activator.targets import Adapter, adapters_from_mapping, parse_adapters


def test_the_annotation_and_the_configmap_say_the_same() -> None:
    expected = (Adapter("chat", "org/chat-lora"), Adapter("sql", "/models/sql"))
    assert parse_adapters(" sql=/models/sql, chat=org/chat-lora ,") == expected
    assert adapters_from_mapping({"sql": "/models/sql", "chat": "org/chat-lora"}) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sql", "'sql' is not name=source"),
        ("sql=a, sql=b", "'sql' is declared twice"),
        ("-sql=a", "adapter name '-sql' is not allowed"),
        ("sql=", "adapter 'sql' needs a source"),
        ("sql=a b", "adapter 'sql' needs a source"),
        (" , ", "the list is empty"),
        ("llama=org/x", "has the name of the base model"),
    ],
)
def test_bad_lists_are_refused_naming_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_adapters(text, base_models=("llama",))


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
