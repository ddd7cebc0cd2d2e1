"""The simulator's doc tables agree with the code (scripts.simulator_tables).

Covers, without running a simulation: the scorecard quoted in
docs/simulator.md has the header ``tidal simulate`` prints now and a row for
every default policy; the many-models block is the same in simulator.md and
warm-tier.md; warm-tier.md no longer says the scorecard lacks the tier.
The numbers themselves come from ``python -m scripts.simulator_tables``.
"""

from __future__ import annotations

from scaler.sim.cli import table
from scaler.sim.runner import POLICY_NAMES
from scripts.simulator_tables import SIMULATOR, WARM_TIER, block_text


def test_the_quoted_scorecard_has_todays_columns_and_rows() -> None:
    block = block_text(SIMULATOR.read_text(), "code-scorecard").splitlines()
    header = table([]).splitlines()[0]
    assert header in block
    rows = block[block.index(header) + 2 :][: len(POLICY_NAMES)]
    names = [line.split()[0].rstrip("*") for line in rows]
    assert names[0].startswith("always-on-")
    assert names[1:] == list(POLICY_NAMES[1:])


def test_many_models_is_one_table_in_both_pages() -> None:
    assert block_text(SIMULATOR.read_text(), "many-models") == block_text(
        WARM_TIER.read_text(), "many-models"
    )
    assert "does not include the tier" not in WARM_TIER.read_text()
