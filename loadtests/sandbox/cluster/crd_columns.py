"""The columns ``kubectl get`` shows for a custom kind: its CRD's printer columns.

The real server builds a custom kind's Table from the CRD version's
``additionalPrinterColumns`` (``NAME`` first, then each column, whose cell
is the value at its JSONPath), and gives a version that declares none one
``Age`` column (``custom_resources`` adds it). The InferencePool CRD
declares none, so ``kubectl get inferencepools`` prints NAME and AGE on a
real cluster and here alike.

A cell follows the column's type as the real table convertor does: a
``string`` column prints the value (a map or list as JSON), ``integer``,
``number`` and ``boolean`` columns carry the value when it has that type,
a ``date`` column shows the age of an RFC 3339 time (``5m``), and a path
that finds nothing leaves the cell empty (kubectl prints ``<none>``).
Column paths are the simple JSONPath CRDs allow: ``.spec.selector``,
``.status.parents[0].parentRef.name``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from loadtests.sandbox.cluster.custom_resources import PrinterColumn, printer_columns

__all__ = ["custom_printer", "printer_for"]

Obj = dict[str, Any]
Column = tuple[str, str, str, int]  # name, type, format, priority
Printer = Callable[[Obj, datetime], list[Any]]
Age = Callable[[Any, datetime], str]

_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")
_MISSING = object()


def _lookup(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (``{.a.b}`` or ``.a.b[0]``), or ``_MISSING``."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    position, value = 0, obj
    while position < len(text):
        step = _STEP.match(text, position)
        if step is None:
            return _MISSING
        key, index = step.group(1), step.group(2)
        if key is not None and isinstance(value, dict) and key in value:
            value = value[key]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return _MISSING
        position = step.end()
    return value


def _cell(column: PrinterColumn, value: Any, now: datetime, age: Age) -> Any:
    if value is _MISSING or value is None:
        return None
    if column.type == "date":
        return age(value, now) if isinstance(value, str) else None
    if column.type == "string":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if column.type == "boolean":
        return value if isinstance(value, bool) else None
    if column.type == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if column.type == "number":
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        return value if is_number else None
    return None


def custom_printer(
    group: str, version: str, kind: str, *, age: Age
) -> tuple[list[Column], Printer] | None:
    """The Table columns and row printer of a custom kind (None: not a custom kind).

    ``age`` renders a timestamp as ``kubectl`` shows ages (the caller's, so
    every Table words ages alike).
    """
    columns = printer_columns(group, version, kind)
    return None if columns is None else printer_for(columns, age=age)


def printer_for(columns: tuple[PrinterColumn, ...], *, age: Age) -> tuple[list[Column], Printer]:
    """The Table columns (``Name`` first) and row printer for ``columns``."""
    header: list[Column] = [("Name", "string", "name", 0)]
    header.extend((c.name, c.type, c.format, c.priority) for c in columns)

    def row(obj: Obj, now: datetime) -> list[Any]:
        name = (obj.get("metadata") or {}).get("name", "")
        return [name, *(_cell(c, _lookup(obj, c.json_path), now, age) for c in columns)]

    return header, row
