"""Where the kubelet keeps each container's output, and reading its end.

The kubelet appends each container's stdout and stderr to
``<log_dir>/<namespace>_<pod>_<container>.log`` (a restart appends to the
same file, so ``kubectl logs`` shows every run, oldest first; the real
kubelet keeps the current run and one previous). The API server reads it
back for the ``pods/log`` subresource. Naming the file in one place keeps
writer and reader in step.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

__all__ = ["container_log_path", "read_tail"]

# How far back from the end a tail looks per step: lines are short, logs are not.
_TAIL_CHUNK = 64 * 1024


def container_log_path(log_dir: Path, namespace: str, pod: str, container: str) -> Path:
    return log_dir / f"{namespace}_{pod}_{container}.log"


def read_tail(path: Path, *, lines: int | None, limit_bytes: int | None) -> tuple[bytes, int]:
    """The last ``lines`` lines of ``path`` (all: None), at most ``limit_bytes`` from
    their start; and the file offset just past what was read (for following)."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            start = 0
            if lines is not None:
                start = _start_of_last_lines(file, size, lines)
            file.seek(start)
            data = file.read(size - start)
    except FileNotFoundError:
        return b"", 0
    if limit_bytes is not None:
        data = data[:limit_bytes]
    return data, start + len(data)


def _start_of_last_lines(file: BinaryIO, size: int, lines: int) -> int:
    """The offset where the last ``lines`` lines begin (a final newline ends a line)."""
    if lines <= 0:
        return size
    end = size
    found = 0
    while end > 0:
        begin = max(0, end - _TAIL_CHUNK)
        file.seek(begin)
        chunk = file.read(end - begin)
        # Skip the newline that ends the file: it ends the last line, not a new one.
        stop = len(chunk) - 1 if end == size and chunk.endswith(b"\n") else len(chunk)
        index = stop
        while True:
            index = chunk.rfind(b"\n", 0, index)
            if index < 0:
                break
            found += 1
            if found == lines:
                return begin + index + 1
        end = begin
    return 0
