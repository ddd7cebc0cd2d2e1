"""``tidal status`` rows from the API alone.

Covers: a Deployment with a bad annotation shows reason InvalidAnnotation and
the parser's message (the scaler leaves it alone, so its status annotation
would otherwise look current), in the table and in JSON rows; a valid one
keeps the reason from its status annotation.
"""

from __future__ import annotations

import json

from scaler.status import render_table, rows
from tests.unit.scaler.fakes import deployment


def test_invalid_annotation_is_shown() -> None:
    bad = deployment("bad", annotations={"autoscaling.tidal.dev/window": "1s"})
    good = deployment(
        "good",
        annotations={"autoscaling.tidal.dev/status": json.dumps({"reason": "Steady"})},
    )
    table = rows([bad, good])
    assert table[0]["reason"] == "InvalidAnnotation"
    assert "autoscaling.tidal.dev/window" in table[0]["problem"]
    assert "1s" in table[0]["problem"]
    assert table[1]["reason"] == "Steady"
    assert "problem" not in table[1]
    text = render_table(table)
    assert "Left alone until fixed:" in text
    assert "default/bad: " in text


def test_warm_tier_columns_show_sleeping_replicas_and_wakes() -> None:
    warm = deployment("warm")
    cold = deployment("cold")
    live = {
        "default/warm": {
            "desired": 1,
            "signals": {},
            "warm": {
                "pods": {"default/warm-1": {"phase": "sleeping", "level": 1, "since": 3.0}},
                "sleeps": 2,
                "wakes": 1,
                "failedWakes": 0,
                "lastWakeSeconds": 0.96,
            },
        },
        "default/cold": {"desired": 0, "signals": {}},
    }
    table = rows([warm, cold], live)
    assert table[0]["live"]["warm"] == {
        "asleep": 1, "wakes": 1, "sleeps": 2, "failed_wakes": 0, "last_wake_s": 0.96,
    }  # fmt: skip
    assert "warm" not in table[1]["live"]
    header, first, second = render_table(table).splitlines()[:3]
    assert header.split()[-3:] == ["ASLEEP", "WAKES", "LAST-WAKE"]
    assert first.split()[-3:] == ["1", "1", "0.96s"]
    assert second.split()[-3:] == ["-", "-", "-"]
