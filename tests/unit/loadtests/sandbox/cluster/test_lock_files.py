"""Lock files: one holder at a time, and nothing left behind after a clean stop.

Covers: a second taker of a held lock gets None; release removes the file
and lets the next taker in; a file a crashed holder left is taken again; an
address block's lock file is gone once the block is released.
"""

from __future__ import annotations

import os
from pathlib import Path

from loadtests.sandbox.cluster.addresses import AddressBlock
from loadtests.sandbox.cluster.lock_files import holder_pid, try_lock


def test_one_holder_and_release_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    first = try_lock(path)
    assert first is not None
    assert holder_pid(path) == os.getpid()
    assert try_lock(path) is None
    first.release()
    assert not path.exists()
    second = try_lock(path)
    assert second is not None
    second.release()


def test_a_file_left_by_a_crash_is_taken_again(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    path.write_text("999999\n")  # a holder that died: the kernel dropped its lock
    lock = try_lock(path)
    assert lock is not None
    assert holder_pid(path) == os.getpid()
    lock.release()


def test_an_address_block_leaves_no_lock_file(tmp_path: Path) -> None:
    block = AddressBlock.acquire(directory=tmp_path)
    assert list(tmp_path.glob("tidal-sandbox-127.*.lock"))
    block.release()
    assert not list(tmp_path.glob("tidal-sandbox-127.*.lock"))
