"""The replicas sampler's pure parts (loadtests.replicas_sampler).

Covers:
- sample() writes a header and one row per poll, a failed poll as a row with
  the error and no counts, and one last poll once stopped.
(Finding the cluster is groundwork.kube.connection's, tested there.)
"""

from __future__ import annotations

import asyncio
import csv
import io

import pytest

from loadtests.replicas_sampler import (
    CSV_COLUMNS,
    ReplicaReadError,
    ReplicaReading,
    sample,
)


class ScriptedReader:
    """Answers from a script; sets ``stop`` when the script runs out."""

    def __init__(self, script: list[ReplicaReading | str], stop: asyncio.Event) -> None:
        self.script = list(script)
        self.stop = stop
        self.calls = 0

    async def read(self) -> ReplicaReading:
        self.calls += 1
        step = self.script.pop(0) if self.script else ReplicaReading(9, 9)
        if not self.script:
            self.stop.set()
        if isinstance(step, str):
            raise ReplicaReadError(step)
        return step


async def test_sample_writes_one_row_per_poll_and_a_last_one() -> None:
    stop = asyncio.Event()
    script: list[ReplicaReading | str] = [ReplicaReading(0, 0), "HTTP 503", ReplicaReading(2, 1)]
    reader = ScriptedReader(script, stop)
    out = io.StringIO()
    clock = iter(float(t) for t in range(100, 200))
    rows = await sample(reader, out, interval_s=0.001, stop=stop, wall_clock=lambda: next(clock))
    lines = list(csv.reader(io.StringIO(out.getvalue())))
    assert lines[0] == list(CSV_COLUMNS)
    assert lines[1:4] == [
        ["100.000", "0", "0", ""],
        ["101.000", "", "", "HTTP 503"],
        ["102.000", "2", "1", ""],
    ]
    assert rows == 4  # the script's three, then one after stop was set
    assert lines[4] == ["103.000", "9", "9", ""]


async def test_sample_refuses_a_bad_interval() -> None:
    with pytest.raises(ValueError, match="interval"):
        await sample(ScriptedReader([], asyncio.Event()), io.StringIO(), interval_s=0,
                     stop=asyncio.Event())  # fmt: skip
