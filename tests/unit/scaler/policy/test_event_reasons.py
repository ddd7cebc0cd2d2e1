"""Every Event reason the scaler raises is in the table the reference is generated from.

Covers: each reason constant of :mod:`scaler.policy.events` and each change
reason has a row; no code names an Event reason with a string literal (so a
new reason cannot skip the table); reasons are unique.
"""

from __future__ import annotations

import ast
from pathlib import Path

import scaler
from scaler.policy import events
from scaler.policy.events import CHANGE_REASONS, EVENT_REASONS

ROOT = Path(scaler.__file__).parent


def test_every_constant_and_change_reason_has_a_row() -> None:
    listed = [e.reason for e in EVENT_REASONS]
    assert len(listed) == len(set(listed))
    constants = {
        value for name, value in vars(events).items() if name.isupper() and isinstance(value, str)
    }
    assert constants | {r.value for r in CHANGE_REASONS} == set(listed)


def test_no_event_reason_is_a_string_literal() -> None:
    found = []
    for path in ROOT.rglob("*.py"):
        if "sim" in path.relative_to(ROOT).parts:
            continue  # the simulator raises no Events
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            literal = [
                k.value
                for k in node.keywords
                if name in ("emit", "note")  # EventSink.emit, Actuator.note
                and k.arg == "reason"
                and isinstance(k.value, ast.Constant)
            ]
            if name == "_notify" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                literal.append(node.args[1])
            found += [f"{path.name}:{node.lineno}" for k in literal if isinstance(k.value, str)]
    assert found == []
