"""Where a named trace is: a path, a file in the traces folder, or a short name.

The two Azure 2023 traces ship inside the package (``simulator/data/``,
CC-BY-4.0, attribution in its ``README.md`` and ``NOTICE``), so ``code`` and
``conv`` work offline after ``pip install``. :func:`find_trace` turns such a
short name or a path into a file; ``TIDAL_TRACES_DIR`` names another folder
of traces to look in, and one that is not a folder is an error saying so
rather than a silent fall-back to the packaged traces.
"""

from __future__ import annotations

import os
from pathlib import Path

from simulator.traces.records import TraceError

__all__ = [
    "PACKAGED_TRACES",
    "TRACES_DIR_ENV",
    "TracesMissingError",
    "find_trace",
    "project_root",
    "traces_dir",
]

TRACES_DIR_ENV = "TIDAL_TRACES_DIR"


class TracesMissingError(FileNotFoundError):
    """The traces folder (or the named trace) is not where it should be."""


def project_root() -> Path:
    """The checkout this module was loaded from (``simulator/traces/`` is three levels down)."""
    return Path(__file__).resolve().parents[3]


#: The traces shipped with the package (the Azure 2023 code and conversation hours).
PACKAGED_TRACES = Path(__file__).resolve().parents[1] / "data"


def traces_dir() -> Path:
    """Where named traces are: ``$TIDAL_TRACES_DIR`` when set, else the packaged ones.

    Raises :class:`TracesMissingError` when the variable names no folder.
    """
    override = os.environ.get(TRACES_DIR_ENV)
    if override:
        path = Path(override)
        if not path.is_dir():
            raise TracesMissingError(
                f"{TRACES_DIR_ENV}={override!r} is not a folder; point it at a folder "
                "of trace files, or unset it to use the traces shipped with Tidal"
            )
        return path
    return PACKAGED_TRACES


def find_trace(name: str) -> Path:
    """A trace file from a path, a file name in :func:`traces_dir`, or a short name.

    ``code`` and ``conv`` match ``azure_llm_2023_code.csv`` and
    ``azure_llm_2023_conv.csv`` (any CSV whose stem ends with ``_<name>``).
    """
    if not name:
        raise TraceError("empty trace name; give a path or a name such as 'code' or 'conv'")
    as_path = Path(name)
    if as_path.is_file():
        return as_path
    if as_path.parent != Path("."):
        raise TracesMissingError(f"trace file {name!r} does not exist")
    folder = traces_dir()
    for candidate in (folder / name, folder / f"{name}.csv"):
        if candidate.is_file():
            return candidate
    available = sorted(p.name for p in folder.glob("*.csv"))
    matches = [folder / p for p in available if Path(p).stem.endswith(f"_{name}")]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise TraceError(
            f"trace name {name!r} matches several files in {folder}: "
            f"{[m.name for m in matches]}; give the file name"
        )
    raise TracesMissingError(
        f"no trace {name!r} in {folder}; available: {available}, or give a path to a "
        "CSV or JSONL file"
    )
