"""The activator as an OpenAI endpoint, the pure part (activator.routing.table).

Covers:
- which requests are the model listing (``GET``/``HEAD /v1/models``, with
  or without a query or a trailing slash; nothing else);
- the listing: every model routed by name, sorted, in OpenAI's shape,
  including a target's several models; none when no target routes by name;
  each card with vLLM's fields;
- the 404 detail for an unknown model names it and the models served, and
  stays short with many models.
"""

from __future__ import annotations

import pytest

from activator.routing.table import RoutingTable, lists_models
from activator.targets import Adapter, TargetSpec


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/v1/models", True),
        ("GET", "/v1/models/", True),
        ("GET", "/v1/models?limit=5", True),
        ("HEAD", "/v1/models", True),
        ("POST", "/v1/models", False),
        ("GET", "/v1/models/llama", False),
        ("GET", "/models", False),
        ("GET", "/v1/modelsx", False),
    ],
)
def test_what_is_a_model_listing(method: str, path: str, expected: bool) -> None:
    assert lists_models(method, path) is expected


def _table(*specs: TargetSpec) -> RoutingTable:
    return RoutingTable.build(specs)


def test_listing_has_every_model_routed_by_name() -> None:
    table = _table(
        TargetSpec(name="ml/llama", models=("llama-3-8b", "llama-3-8b-instruct")),
        TargetSpec(name="ml/mistral", models=("mistral-7b",)),
        TargetSpec(name="ml/by-host", hosts=("triton.example.com",)),
    )
    listing = table.models_listing()
    assert listing["object"] == "list"
    assert [(m["id"], m["owned_by"], m["parent"]) for m in listing["data"]] == [  # type: ignore[index, union-attr]
        ("llama-3-8b", "ml/llama", None),
        ("llama-3-8b-instruct", "ml/llama", None),
        ("mistral-7b", "ml/mistral", None),
    ]


def test_each_card_has_the_fields_of_vllms() -> None:
    (card,) = _table(
        TargetSpec(name="ml/llama", models=("meta-llama/Llama-3.1-8B",))
    ).models_listing()["data"]  # type: ignore[misc]
    # vLLM's ModelCard fields (vllm/entrypoints/openai/protocol.py), in its order.
    assert list(card) == [
        "id", "object", "created", "owned_by", "root", "parent", "max_model_len", "permission",
    ]  # fmt: skip
    assert (card["root"], card["max_model_len"]) == ("meta-llama/Llama-3.1-8B", None)
    assert card["permission"][0]["allow_sampling"] is True


def test_adapters_are_routed_to_their_base_model_and_listed_with_it() -> None:
    llama = TargetSpec(
        name="ml/llama",
        models=("llama-3-8b",),
        adapters=(Adapter("sql-lora", "org/sql-lora"),),
    )
    table = _table(llama, TargetSpec(name="ml/other", adapters=(Adapter("sql-lora", "x"),)))
    assert table.by_model("sql-lora") == "ml/llama"
    assert table.conflicts == (
        "model 'sql-lora' is claimed by ml/llama and ml/other; ml/llama keeps it",
    )
    data = table.models_listing()["data"]
    assert isinstance(data, list)
    cards = {c["id"]: c for c in data}
    assert cards["sql-lora"]["parent"] == "llama-3-8b"
    assert cards["llama-3-8b"]["parent"] is None


def test_listing_is_empty_without_models() -> None:
    assert _table(TargetSpec(name="ml/a", path_prefix="/a")).models_listing()["data"] == []


def test_unknown_model_names_what_was_asked_and_what_is_served() -> None:
    table = _table(TargetSpec(name="ml/a", models=("b-model", "a-model")))
    assert table.unknown_model("gpt-4") == (
        "model 'gpt-4' is not served here; served: 'a-model', 'b-model'"
    )
    assert _table().unknown_model("x") == "model 'x' is not served here; served: none"


def test_unknown_model_message_stays_short_with_many_models() -> None:
    names = tuple(f"m-{i:03d}" for i in range(45))
    message = _table(TargetSpec(name="ml/a", models=names)).unknown_model("x")
    assert "'m-000'" in message
    assert "'m-019'" in message
    assert "'m-020'" not in message
    assert message.endswith("and 25 more (GET /v1/models)")
