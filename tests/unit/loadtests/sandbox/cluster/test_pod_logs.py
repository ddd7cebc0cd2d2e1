"""Reading the end of a container's log: ``tailLines`` and ``limitBytes`` as kubectl means them.

Covers: the last N lines with and without a final newline, more lines asked
than there are, zero lines, a tail longer than one read chunk, a byte limit,
and a missing file (nothing yet).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.sandbox.cluster import pod_logs
from loadtests.sandbox.cluster.pod_logs import read_tail


@pytest.mark.parametrize(
    ("text", "lines", "expected"),
    [
        ("a\nb\nc\n", 2, "b\nc\n"),
        ("a\nb\nc", 2, "b\nc"),
        ("a\nb\n", 5, "a\nb\n"),
        ("a\nb\n", 0, ""),
        ("a\nb\n", None, "a\nb\n"),
    ],
)
def test_tail_lines(tmp_path: Path, text: str, lines: int | None, expected: str) -> None:
    path = tmp_path / "log"
    path.write_text(text)
    data, offset = read_tail(path, lines=lines, limit_bytes=None)
    assert data.decode() == expected
    assert offset == len(text)


def test_tail_across_chunks_and_byte_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_logs, "_TAIL_CHUNK", 7)
    path = tmp_path / "log"
    path.write_text("".join(f"line {i}\n" for i in range(10)))
    assert read_tail(path, lines=3, limit_bytes=None)[0] == b"line 7\nline 8\nline 9\n"
    assert read_tail(path, lines=3, limit_bytes=4)[0] == b"line"
    assert read_tail(tmp_path / "missing", lines=3, limit_bytes=None) == (b"", 0)
