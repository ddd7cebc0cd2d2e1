"""docs/gateway-api.md against the code: every metric the reader reads is in its table.

Covers: each family of ``scaler.signals.epp_metrics.FAMILIES`` has a row
naming its current name, its older twin (or none) and its labels, and a row
in the table of what each feeds in the scaler's decision; every outcome
value is listed; the page cites the router commit the reader cites.
"""

from __future__ import annotations

import re
from pathlib import Path

from scaler.signals import epp_metrics
from scaler.signals.epp_metrics import FAMILIES, OUTCOMES

PAGE = Path(__file__).resolve().parents[3] / "docs" / "gateway-api.md"


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `llm_d_epp_"):
            rows[cells[0].strip("`")] = cells
    return rows


def test_every_family_has_a_row_with_its_twin_and_labels() -> None:
    rows = _rows()
    assert set(rows) == {f.name for f in FAMILIES}
    above: set[str] = set()
    for name, cells in rows.items():  # in the page's order: "same" means the row above's
        family = next(f for f in FAMILIES if f.name == name)
        older, kind, labels = cells[1:4]
        assert kind == family.type, name
        if family.legacy is None:
            assert older == "none", name
        else:
            assert older.startswith(f"`{family.legacy}`"), name
        # Label names in backquotes; their values, in parentheses, aside.
        shown = (
            above
            if labels == "same"
            else set(re.findall(r"`([a-z_]+)`", re.sub(r"\(.*?\)", "", labels)))
        )
        assert shown == set(family.labels), name
        above = shown


def test_every_outcome_and_the_cited_commit_are_on_the_page() -> None:
    text = PAGE.read_text()
    for outcome in OUTCOMES:
        assert f"`{outcome}`" in text
    commit = re.search(r"commit ([0-9a-f]{12})", epp_metrics.__doc__ or "")
    assert commit is not None and commit.group(1) in text


def test_every_family_says_what_it_feeds() -> None:
    text = PAGE.read_text()
    start = text.index("| what it says (current name) | what the scaler does with it |")
    table = text[start : text.index("\n\n", start)]
    named = set(re.findall(r"`(llm_d_epp_[a-z_]+)`", table))
    assert named == {f.name for f in FAMILIES}
