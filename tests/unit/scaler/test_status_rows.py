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
