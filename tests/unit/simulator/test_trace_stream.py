"""Traces read as streams (simulator.trace_stream, traces.stream_trace, the world's reading).

Covers: a file in time order streams to what reading it whole gives, and
one out of order is refused as a stream and read whole (sorted) by
``tidal simulate``; a streamed trace reads the same requests on every
replay, with its length and ends known; the window and the load factor on
a stream equal their list versions, ties in order; the world reads its
requests once, as they come, with the result of a list's run, and refuses
a stream out of time order.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator import cli, trace_stream, traces
from simulator.baselines import AlwaysOn
from simulator.trace_stream import StreamedTrace, scaled, windowed
from simulator.traces import TraceRequest, UnsortedTraceError
from simulator.world import WorldConfig, run_world

TRACE = [TraceRequest(0.5 * (i // 2), 100 + i, 3 + i % 4) for i in range(40)]


def _file(tmp_path: Path, rows: list[tuple[float, int, int]]) -> Path:
    path = tmp_path / "trace.csv"
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"{t},{p},{o}" for t, p, o in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_sorted_file_streams_to_what_reading_it_whole_gives(tmp_path: Path) -> None:
    path = _file(tmp_path, [(1700000000 + i * 0.7, 10 + i, 2) for i in range(30)])
    assert list(traces.stream_trace(path)) == traces.read_trace(path)


def test_a_file_out_of_order_is_read_whole_by_the_command(tmp_path: Path) -> None:
    path = _file(tmp_path, [(5.0, 10, 2), (1.0, 11, 3), (3.0, 12, 4)])
    with pytest.raises(UnsortedTraceError, match="time order"):
        list(traces.stream_trace(path))
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    records = cli.load_requests(parser.parse_args(["--trace", str(path)]), warn=False)
    assert [r.offset_s for r in records] == [1.0, 3.0, 5.0]


def test_a_streamed_trace_replays_the_same_requests_each_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace_stream, "KEEP", 10)  # longer than this: read again each time
    opened: list[int] = []

    def opener() -> Iterator[TraceRequest]:
        opened.append(1)
        return iter(TRACE)

    stream = StreamedTrace(opener)
    assert len(stream) == len(TRACE) and stream[0] == TRACE[0] and stream[-1] == TRACE[-1]
    assert list(stream) == list(stream) == TRACE
    assert stream[7] == TRACE[7]
    assert len(opened) == 4  # the survey, two replays and a walk to the eighth request
    monkeypatch.setattr(trace_stream, "KEEP", len(TRACE))
    opened.clear()
    kept = StreamedTrace(opener)
    assert list(kept) == list(kept) == TRACE
    assert len(opened) == 1  # short: kept from the first reading


def test_the_window_and_load_factor_on_a_stream_equal_their_list_versions() -> None:
    assert list(windowed(TRACE, start_s=2.0, duration_s=4.0)) == traces.window(
        TRACE, start_s=2.0, duration_s=4.0
    )
    for factor in (0.5, 1.0, 2.0, 2.7):
        assert list(scaled(TRACE, factor, seed=3)) == cli.scale_load(TRACE, factor, seed=3)


def test_the_world_reads_a_stream_once_with_the_result_of_a_list() -> None:
    read: list[TraceRequest] = []

    def once() -> Iterator[TraceRequest]:
        for r in TRACE:
            read.append(r)
            yield r

    streamed = run_world(once(), AlwaysOn(1), WorldConfig())
    assert read == TRACE
    assert streamed == run_world(TRACE, AlwaysOn(1), WorldConfig())
    with pytest.raises(ValueError, match="time order"):
        run_world(reversed(TRACE), AlwaysOn(1), WorldConfig())
