"""Workload traces for the load tests: the simulator's trace reader, re-exported.

The parsing (CSV and JSONL, field names, time units, absolute or relative
timestamps), windowing and compression live in :mod:`simulator.traces`, so
the policy simulator and the load tests' open-loop replay read a trace the
same way. This module keeps the names the load tests have always imported.

Pure: no locust (importing it patches the process with gevent).
"""

from __future__ import annotations

from simulator.traces import (
    TRACES_DIR_ENV,
    TraceError,
    TraceFormat,
    TraceRequest,
    TracesMissingError,
    TraceSummary,
    compress,
    find_trace,
    parse_trace,
    prepare,
    project_root,
    read_trace,
    summarize,
    traces_dir,
    window,
)

__all__ = [
    "TRACES_DIR_ENV",
    "TraceError",
    "TraceFormat",
    "TraceRequest",
    "TraceSummary",
    "TracesMissingError",
    "compress",
    "find_trace",
    "parse_trace",
    "prepare",
    "project_root",
    "read_trace",
    "summarize",
    "traces_dir",
    "window",
]
