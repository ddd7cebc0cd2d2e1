"""Workload traces: request arrival times and token counts, read from CSV or JSONL.

The policy simulator (``tidal simulate``) and the load tests' open-loop
replay both start from a list of :class:`TraceRequest` records: when a
request arrives (seconds from the start of the trace), how many prompt tokens
it carries, how many tokens it generates, and (optionally) which model it is
for. This package turns trace files into such records, cuts a window out of
them and compresses time. ``loadtests.traces`` re-exports it: the parsing
lives here, once. Its parts, each with the rule it keeps:

- :mod:`~simulator.traces.records`: the records, the format (field names,
  time unit, absolute or relative timestamps, CSV or JSONL) and the errors;
- :mod:`~simulator.traces.finding`: a short name (``code``, ``conv``, the
  Azure 2023 traces shipped with the package), a file in
  ``$TIDAL_TRACES_DIR`` or a path, as a file;
- :mod:`~simulator.traces.values`: one field read as a time, a token count
  or block hashes;
- :mod:`~simulator.traces.reading`: a file read whole (sorted) or as a
  stream (in time order), and the main decision: *absolute* timestamps
  are re-based so that the earliest request is at 0, *relative* ones kept
  as written;
- :mod:`~simulator.traces.windows`: the window replayed (re-based to 0) and
  compression (offsets only);
- :mod:`~simulator.traces.summary`: a trace's summary, and whether its span
  or rate suggests the wrong time unit.

Everything a caller uses is importable from here, as it was when this was
one module.

Pure: no I/O beyond reading the file you name.
"""

from __future__ import annotations

from simulator.traces.finding import (
    PACKAGED_TRACES,
    TRACES_DIR_ENV,
    TracesMissingError,
    find_trace,
    project_root,
    traces_dir,
)
from simulator.traces.reading import parse_trace, read_trace, stream_trace
from simulator.traces.records import (
    AZURE_2023,
    FileKind,
    Timestamps,
    TimeUnit,
    TraceError,
    TraceFormat,
    TraceRequest,
    UnsortedTraceError,
)
from simulator.traces.summary import TraceSummary, summarize, unit_warnings
from simulator.traces.windows import compress, prepare, window

__all__ = [
    "AZURE_2023",
    "PACKAGED_TRACES",
    "TRACES_DIR_ENV",
    "FileKind",
    "TimeUnit",
    "Timestamps",
    "TraceError",
    "TraceFormat",
    "TraceRequest",
    "TraceSummary",
    "TracesMissingError",
    "UnsortedTraceError",
    "compress",
    "find_trace",
    "parse_trace",
    "prepare",
    "project_root",
    "read_trace",
    "stream_trace",
    "summarize",
    "traces_dir",
    "unit_warnings",
    "window",
]
