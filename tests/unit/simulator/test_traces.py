"""Trace parsing (simulator.traces; loadtests.traces re-exports it).

Covers:
- parsing the Azure trace columns, seven-digit fractional seconds, offsets
  from the earliest request, rows sorted by time;
- clear errors for missing columns, unreadable rows, negative counts, empty files;
- windowing (re-based to the window start, bounds half-open) and compression;
- finding a trace by path, file name or short name, and the message when
  TIDAL_TRACES_DIR names no folder; without it, the traces shipped in the
  package (no folder beside the checkout needed);
- the shipped code trace matches what its README says of it;
- JSONL with its own field names: dotted paths into nested objects, ISO
  date-times with a zone, counts written as floats, a prefix field of block
  hashes (JSON list, or text in CSV), and a clear error for a bad prefix;
- a trace read in the wrong unit draws a warning naming the flag;
- a JSON file of one array, with a byte order mark, reads as JSONL; rows
  with an empty or null value are skipped and counted when the caller asks;
- field names by flag, JSONL, numeric timestamps in s or ms, absolute
  (re-based) versus relative (kept) times, a model field, and the errors for
  each (a missing field named with the flags that rename it, bad JSON, a
  date-time forced relative, negative relative times);
- loadtests.traces re-exports the same objects (one parser, not a copy).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator import traces
from simulator.traces import TraceError, TraceFormat, TraceRequest, TracesMissingError

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def parse(text: str) -> list[TraceRequest]:
    return traces.parse_trace(text.splitlines(keepends=True), source="t.csv")


def test_parses_offsets_from_the_first_request_with_seven_fraction_digits() -> None:
    records = parse(
        HEADER
        + "2023-11-16 18:17:03.9799600,4808,10\n"
        + "2023-11-16 18:17:04.0319600,3180,8\n"
        + "2023-11-16 18:18:04,110,27\n"
    )
    assert [r.prompt_tokens for r in records] == [4808, 3180, 110]
    assert [r.output_tokens for r in records] == [10, 8, 27]
    assert records[0].offset_s == 0.0
    assert records[1].offset_s == pytest.approx(0.052, abs=1e-6)
    assert records[2].offset_s == pytest.approx(60.02004, abs=1e-6)


def test_rows_out_of_order_are_sorted() -> None:
    records = parse(HEADER + "2023-11-16 00:00:05.0,1,1\n2023-11-16 00:00:02.5,2,2\n")
    assert records == [TraceRequest(0.0, 2, 2), TraceRequest(2.5, 1, 1)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("TIMESTAMP,ContextTokens\n", "missing column", id="missing-column"),
        pytest.param(HEADER + "yesterday,1,2\n", "t.csv:2", id="bad-time"),
        pytest.param(HEADER + "2023-11-16 00:00:01.0,x,2\n", "t.csv:2", id="bad-count"),
        pytest.param(HEADER + "2023-11-16 00:00:01.0,-1,2\n", "negative", id="negative"),
        pytest.param(HEADER, "no requests", id="empty"),
    ],
)
def test_bad_input_is_named(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse(text)


RECORDS = [TraceRequest(float(t), t, 1) for t in (0, 5, 10, 15, 20)]


def test_window_is_half_open_and_rebased_to_its_start() -> None:
    assert traces.window(RECORDS, start_s=5, duration_s=10) == [
        TraceRequest(0.0, 5, 1),
        TraceRequest(5.0, 10, 1),
    ]
    # An idle stretch at the start of a window is kept: offsets count from start_s.
    assert traces.window(RECORDS, start_s=3, duration_s=3) == [TraceRequest(2.0, 5, 1)]
    assert traces.window(RECORDS, start_s=12) == [
        TraceRequest(3.0, 15, 1),
        TraceRequest(8.0, 20, 1),
    ]


def test_compression_divides_offsets_only() -> None:
    assert traces.compress(RECORDS[:2], 10) == [TraceRequest(0.0, 0, 1), TraceRequest(0.5, 5, 1)]
    assert traces.prepare(RECORDS, start_s=10, duration_s=10, compression=5) == [
        TraceRequest(0.0, 10, 1),
        TraceRequest(1.0, 15, 1),
    ]


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: traces.compress(RECORDS, 0), id="zero-compression"),
        pytest.param(lambda: traces.window(RECORDS, start_s=-1), id="negative-start"),
        pytest.param(lambda: traces.window(RECORDS, duration_s=0), id="zero-duration"),
    ],
)
def test_bad_window_parameters(call: object) -> None:
    with pytest.raises(TraceError):
        call()  # type: ignore[operator]


def test_find_trace_by_short_name_file_name_and_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("azure_llm_2023_code.csv", "azure_llm_2023_conv.csv"):
        (tmp_path / name).write_text(HEADER + "2023-11-16 00:00:01.0,1,1\n")
    monkeypatch.setenv(traces.TRACES_DIR_ENV, str(tmp_path))
    assert traces.find_trace("code") == tmp_path / "azure_llm_2023_code.csv"
    assert traces.find_trace("azure_llm_2023_conv") == tmp_path / "azure_llm_2023_conv.csv"
    assert traces.find_trace(str(tmp_path / "azure_llm_2023_conv.csv")).name.endswith("conv.csv")
    with pytest.raises(TracesMissingError, match="available"):
        traces.find_trace("chat")


def test_a_bad_traces_folder_is_named_and_the_packaged_traces_need_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(traces.TRACES_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(TracesMissingError, match="nowhere"):
        traces.find_trace("code")
    monkeypatch.delenv(traces.TRACES_DIR_ENV)
    # Nothing beside the checkout: the traces come with the package.
    monkeypatch.setattr(traces, "project_root", lambda: tmp_path / "checkout")
    assert traces.find_trace("code").parent == traces.PACKAGED_TRACES
    assert traces.find_trace("conv").name == "azure_llm_2023_conv.csv"
    assert (traces.PACKAGED_TRACES / "NOTICE").read_text().count("CC-BY-4.0") == 1


def real_trace(name: str) -> list[TraceRequest]:
    return traces.read_trace(traces.find_trace(name))


def test_the_code_trace_looks_as_its_readme_says() -> None:
    records = real_trace("code")
    summary = traces.summarize(records)
    # README: 8,818 requests in one hour, 154/min, median 1,469 prompt and 13 output tokens,
    # longest idle gap 217 s.
    assert 8_800 <= summary.requests <= 8_830
    assert 150 <= summary.requests_per_min <= 158
    assert 1_400 <= summary.median_prompt_tokens <= 1_600
    assert summary.median_output_tokens == 13
    assert 200 <= summary.longest_gap_s <= 230


def test_fields_by_name_and_relative_milliseconds_are_kept_as_written() -> None:
    fmt = TraceFormat(time_field="t", prompt_field="in", output_field="out", time_unit="ms")
    records = traces.parse_trace(["t,in,out\n", "2500,10,3\n", "500,7,1\n"], fmt=fmt)
    # Relative offsets are not re-based: the first request comes 0.5 s in.
    assert records == [TraceRequest(0.5, 7, 1), TraceRequest(2.5, 10, 3)]


def test_epoch_numbers_are_absolute_and_re_based() -> None:
    fmt = TraceFormat(time_field="ts", prompt_field="p", output_field="o")
    lines = ['{"ts": 1700000010.5, "p": 5, "o": 2}\n', "\n", '{"ts": 1700000000, "p": 4, "o": 1}\n']
    records = traces.parse_trace(lines, fmt=fmt, kind="jsonl")
    assert records == [TraceRequest(0.0, 4, 1), TraceRequest(10.5, 5, 2)]


def test_forcing_absolute_re_bases_small_numbers_and_a_model_field_is_read() -> None:
    fmt = TraceFormat(
        time_field="t", prompt_field="p", output_field="o", model_field="m", timestamps="absolute"
    )
    records = traces.parse_trace(["t,p,o,m\n", "7,1,1,a\n", "9,2,2,b\n"], fmt=fmt)
    assert records == [TraceRequest(0.0, 1, 1, "a"), TraceRequest(2.0, 2, 2, "b")]


def test_read_trace_picks_jsonl_by_suffix(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"TIMESTAMP": "2023-11-16T00:00:01.5", "ContextTokens": 3, "GeneratedTokens": 2}\n'
    )
    assert traces.read_trace(path) == [TraceRequest(0.0, 3, 2)]


@pytest.mark.parametrize(
    ("lines", "fmt", "kind", "message"),
    [
        pytest.param(
            ['{"TIMESTAMP": 1, "ContextTokens": 2}\n'],
            TraceFormat(),
            "jsonl",
            r"t:1: missing field\(s\) \['GeneratedTokens'\].*--output-field",
            id="jsonl-missing-field",
        ),
        pytest.param(
            ["{not json\n"], TraceFormat(), "jsonl", "t:1: not a JSON object", id="bad-json"
        ),
        pytest.param(["[1, 2, 3]\n"], TraceFormat(), "jsonl", "got list", id="json-not-object"),
        pytest.param(
            ["a,b,c\n", "1,2,3\n"],
            TraceFormat(),
            "csv",
            r"missing column.*--time-field",
            id="csv-default-columns-absent",
        ),
        pytest.param(
            [HEADER, "2023-11-16 00:00:01,1,1\n"],
            TraceFormat(timestamps="relative"),
            "csv",
            "date-times, which are absolute",
            id="datetime-forced-relative",
        ),
        pytest.param(
            [HEADER, "-3,1,1\n"], TraceFormat(), "csv", "must be >= 0", id="negative-relative"
        ),
        pytest.param(
            ['{"TIMESTAMP": 1, "ContextTokens": 2.5, "GeneratedTokens": 1}\n'],
            TraceFormat(),
            "jsonl",
            "whole number",
            id="fractional-tokens",
        ),
    ],
)
def test_bad_files_say_what_was_expected(
    lines: list[str], fmt: TraceFormat, kind: str, message: str
) -> None:
    with pytest.raises(TraceError, match=message):
        traces.parse_trace(lines, source="t", fmt=fmt, kind=kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"time_unit": "min"}, id="unit"),
        pytest.param({"timestamps": "sometimes"}, id="timestamps"),
        pytest.param({"kind": "xml"}, id="kind"),
        pytest.param({"time_field": ""}, id="empty-field"),
    ],
)
def test_bad_format_settings_are_refused(kwargs: dict[str, str]) -> None:
    with pytest.raises(TraceError):
        TraceFormat(**kwargs)  # type: ignore[arg-type]


def test_loadtests_traces_is_the_same_parser() -> None:
    from loadtests import traces as loadtest_traces

    assert loadtest_traces.parse_trace is traces.parse_trace
    assert loadtest_traces.TraceRequest is TraceRequest


def test_jsonl_with_its_own_nested_fields_zones_and_prefixes() -> None:
    fmt = TraceFormat(
        time_field="meta.sent",
        prompt_field="usage.in",
        output_field="usage.out",
        prefix_field="hash_ids",
    )
    lines = [
        '{"meta": {"sent": "2024-05-01T10:00:01.5+02:00"}, "usage": {"in": 1024, "out": 8.0},'
        ' "hash_ids": [1, 2]}\n',
        '{"meta": {"sent": "2024-05-01T08:00:00Z"}, "usage": {"in": "512", "out": 3},'
        ' "hash_ids": [1]}\n',
    ]
    records = traces.parse_trace(lines, fmt=fmt, kind="jsonl")
    assert records == [TraceRequest(0.0, 512, 3, "", (1,)), TraceRequest(1.5, 1024, 8, "", (1, 2))]
    csv_fmt = TraceFormat(time_field="t", prompt_field="p", output_field="o", prefix_field="h")
    rows = traces.parse_trace(["t,p,o,h\n", '0,10,1,"[7, 8]"\n', "1,10,1,7 9\n"], fmt=csv_fmt)
    assert [r.prefix for r in rows] == [(7, 8), (7, 9)]
    with pytest.raises(TraceError, match=r"'h'.*list of block hashes"):
        traces.parse_trace(["t,p,o,h\n", '0,10,1,"{}"\n'], fmt=csv_fmt)
    with pytest.raises(TraceError, match=r"missing field\(s\) \['usage.out'\].*--prefix-field"):
        traces.parse_trace(
            ['{"meta": {"sent": 1}, "usage": {"in": 1}, "hash_ids": []}\n'], fmt=fmt, kind="jsonl"
        )


def test_a_trace_read_in_the_wrong_unit_warns_with_the_flag() -> None:
    hour_in_ms = [TraceRequest(t * 1000.0, 10, 1) for t in range(0, 3600, 10)]
    (warning,) = traces.unit_warnings(hour_in_ms, TraceFormat())
    assert "41.6 days" in warning and "--time-unit ms" in warning
    seconds_as_ms = [TraceRequest(t / 2000.0, 10, 1) for t in range(3600)]
    (warning,) = traces.unit_warnings(seconds_as_ms, TraceFormat(time_unit="ms"))
    assert "leave out --time-unit ms" in warning
    assert (
        traces.unit_warnings([TraceRequest(float(t), 10, 1) for t in range(3600)], TraceFormat())
        == []
    )


def test_a_json_array_with_a_bom_and_rows_without_values(tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    rows = [
        {"t": 0, "in": 10, "out": 2},
        {"t": 1, "in": 12, "out": None},
        {"t": 2, "in": 14, "out": 3},
    ]
    path.write_text("\ufeff" + json.dumps(rows, indent=2), encoding="utf-8")
    fmt = TraceFormat(time_field="t", prompt_field="in", output_field="out")
    notes: list[str] = []
    records = traces.read_trace(path, fmt, notes=notes)
    assert [r.prompt_tokens for r in records] == [10, 14]
    assert notes == [
        "skipped 1 row(s) with an empty or null 't' or 'in' or 'out' (the first at line 2)"
    ]
    with pytest.raises(TraceError, match="whole number"):
        traces.read_trace(path, fmt)
