"""The ``model`` of a request body routed by it, or the precise reason there is none.

The proxy reads a body whole only to route it by OpenAI's ``model`` field
(:mod:`activator.routing.table`, step 4). Three mistakes look alike from the
outside and are told apart here, each its own 400 (docs/statuses.md):

- **not JSON** (:class:`~activator.statuses.InvalidJson`): an unclosed
  bracket, single-quoted pseudo-JSON, a stray comma; the message is the
  parser's, with its line, column and character position, which is what
  the sender needs to find the mistake;
- **JSON, not an object** (:class:`~activator.statuses.BodyNotObject`): a
  list or a string, said by its JSON type;
- **an object without a usable model** (:class:`~activator.statuses.BadModel`):
  no ``model``, or one that is not a non-empty string (its JSON type is said).

Main decision: the detail quotes nothing of the body beyond the parser's
own words and the type of ``model``: a prompt can hold anything, and an
error message is logged.
"""

from __future__ import annotations

import json

from activator.statuses import BadModel, BodyNotObject, InvalidJson

__all__ = ["model_of"]

_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def _kind(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def model_of(body: bytes) -> tuple[object, str]:
    """The parsed body and its ``model``; raises the :class:`~activator.statuses.BadBody`
    subclass that says what is wrong."""
    try:
        document = json.loads(body)
    except UnicodeDecodeError as exc:
        raise InvalidJson(f"not UTF-8 at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise InvalidJson(
            f"{exc.msg} at line {exc.lineno}, column {exc.colno} (character {exc.pos})"
        ) from None
    except RecursionError:  # JSON nested deeper than the interpreter's stack
        raise InvalidJson("nested too deeply") from None
    if not isinstance(document, dict):
        raise BodyNotObject(f"got {_kind(document)}")
    if "model" not in document:
        raise BadModel("the body has no 'model'")
    model = document["model"]
    if not isinstance(model, str) or not model:
        got = "an empty string" if model == "" else _kind(model)
        raise BadModel(f"got {got}")
    return document, model
