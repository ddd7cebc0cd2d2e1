"""The simulator's reference page prints what its commands print (scripts.simulator_tables).

Covers: every ``$ tidal simulate`` command shown with its output in
docs/simulator.md sits in a generated block whose first line is that
block's command; the scorecard block has the header ``tidal simulate``
prints now and a row for every default policy; one block's command, run
again, prints exactly the block (the cheapest: one policy on the code
trace); the many-models block is the same in simulator.md and warm-tier.md;
the GPU shapes' page shows each of its commands with every row it prints.
The figures themselves come from ``python -m scripts.simulator_tables``.
"""

from __future__ import annotations

import re
import shlex

from scripts.simulator_tables import (
    COMMANDS,
    SHAPE_COMMANDS,
    SHAPES,
    SIMULATOR,
    WARM_TIER,
    block_text,
    command_output,
)
from simulator.cli import table
from simulator.gpu_shapes import LIST_PRICES
from simulator.runner import POLICY_NAMES

_BLOCK = re.compile(
    r"<!-- BEGIN generated:([a-z-]+) .*?-->\n(.*?)\n<!-- END generated:\1 -->", re.S
)


def test_every_command_shown_with_output_is_a_generated_block() -> None:
    page = SIMULATOR.read_text()
    inside = "".join(body for _, body in _BLOCK.findall(page))
    shown = re.findall(r"^\$ tidal simulate .*$", page, flags=re.M)
    assert shown, "the page shows commands with their output"
    for line in shown:
        assert line in inside, f"{line!r} is not in a generated block"
    for name, flags in COMMANDS.items():
        body = block_text(page, name).splitlines()
        assert body[:2] == ["```", f"$ tidal simulate {shlex.join(flags)}"], name


def test_the_quoted_scorecard_has_todays_columns_and_rows() -> None:
    block = block_text(SIMULATOR.read_text(), "code-scorecard").splitlines()
    # With fixed fleets in the run, the rows carry their frontier verdict last.
    header = table([]).splitlines()[0] + " frontier"
    assert header in block
    rows = block[block.index(header) + 2 :][: len(POLICY_NAMES)]
    names = [line.split()[0].rstrip("*") for line in rows]
    assert names[0].startswith("always-on-")
    assert names[1:] == list(POLICY_NAMES[1:])


def test_a_blocks_command_prints_the_block() -> None:
    block = block_text(SIMULATOR.read_text(), "sweep-default").splitlines()
    assert block[2:-1] == command_output(COMMANDS["sweep-default"]).splitlines()


def test_many_models_is_one_table_in_both_pages() -> None:
    assert block_text(SIMULATOR.read_text(), "many-models") == block_text(
        WARM_TIER.read_text(), "many-models"
    )
    assert "does not include the tier" not in WARM_TIER.read_text()


def test_the_shapes_page_shows_each_command_with_every_row() -> None:
    block = block_text(SHAPES.read_text(), "shapes")
    rows = ["tidal", *(f"tidal:{name}" for name in LIST_PRICES), "tidal-mix"]
    outputs = block.split("$ tidal simulate ")[1:]
    assert len(outputs) == len(SHAPE_COMMANDS)
    for flags, output in zip(SHAPE_COMMANDS, outputs, strict=True):
        lines = output.splitlines()
        assert lines[0] == shlex.join(flags)
        assert [line.split()[0] for line in lines[3 : 3 + len(rows)]] == rows
