"""Suite-wide hygiene.

Covers:
- every async test fails if it leaves asyncio tasks running (after a short
  grace for tasks that are already cancelled and just need to unwind);
- every test fails if it leaves child processes behind, direct or not (pod
  processes started by the sandbox run in their own process groups, so we
  walk /proc for descendants rather than trusting process groups); the
  leftovers are killed so one leaky test cannot poison the rest;
- no event loop is created implicitly: a sync test run before the first async
  one would otherwise get one from looptime's ``policy.get_event_loop()``
  that nobody closes (an "unclosed event loop" error at a later test);
- under pytest-xdist, the longest tests are handed out first;
- ``tidal simulate`` keeps nothing in the user's fixed-fleet cache folder;
- ``tool_path`` finds a binary a test needs, or fails with the install hint:
  a test never skips silently because a tool is missing.

Warnings are errors and every test has a timeout (pyproject.toml).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

# Debian package that provides each binary a test may ask for.
DEBIAN_PACKAGES = {"prometheus": "prometheus", "promtool": "prometheus", "nginx": "nginx"}


def pytest_sessionstart(session: pytest.Session) -> None:
    # Marks the main thread's loop as explicitly unset, so get_event_loop() raises
    # instead of creating a loop; pytest-asyncio sets its own for each async test.
    asyncio.set_event_loop(None)


def _expected_length(item: pytest.Item) -> tuple[int, float]:
    """A sort key, longest first: end-to-end tests by their timeout mark, then slow
    ones, then the rest; unit tests last (the most numerous and the shortest)."""
    timeout = item.get_closest_marker("timeout")
    seconds = float(timeout.args[0]) if timeout is not None and timeout.args else 0.0
    if item.get_closest_marker("e2e") is not None:
        tier = 3 if item.get_closest_marker("slow") is not None else 2
    else:
        tier = 0 if "/unit/" in str(item.path) else 1
    return (-tier, -seconds)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Under pytest-xdist (make test), the longest tests go out first, one per
        # worker in turn, so that none of them starts last and keeps the run waiting.
        # A run in one process keeps the files' order.
        items.sort(key=_expected_length)
    for item in items:
        func = getattr(item, "function", None)
        if func is not None and inspect.iscoroutinefunction(func):
            # Inserted first so that it is set up first and torn down last,
            # after the test's own fixtures have cleaned up.
            item.fixturenames.insert(0, "_no_leftover_tasks")  # type: ignore[attr-defined]


@pytest_asyncio.fixture
async def _no_leftover_tasks() -> AsyncIterator[None]:
    yield
    current = asyncio.current_task()

    def pending() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t is not current and not t.done()]

    # Cancelled tasks need a few loop iterations to unwind.
    for _ in range(20):
        if not pending():
            return
        await asyncio.sleep(0.01)
    leftovers = pending()
    names = sorted(f"{t.get_name()} ({t.get_coro()!r})" for t in leftovers)
    for task in leftovers:
        task.cancel()
    await asyncio.gather(*leftovers, return_exceptions=True)
    pytest.fail(f"test left {len(leftovers)} asyncio task(s) running: {names}")


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may contain spaces.
        fields = stat[stat.rindex(")") + 2 :].split()
        state, ppid = fields[0], int(fields[1])
        if state == "Z":  # a zombie has exited; its parent just has not reaped it yet
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(pid: int) -> set[int]:
    """Live (non-zombie) descendants of ``pid``."""
    tree = _children_map()
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in tree.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


@pytest.fixture(autouse=True)
def _no_leftover_processes() -> Iterator[None]:
    me = os.getpid()
    before = descendants(me)
    yield
    deadline = time.monotonic() + 5.0
    leftovers = descendants(me) - before
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = descendants(me) - before
    if not leftovers:
        return
    described = []
    for pid in sorted(leftovers):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            cmd = "?"
        described.append(f"{pid}: {cmd[:120]}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    pytest.fail("test left child processes running (killed now):\n" + "\n".join(described))


@pytest.fixture(autouse=True)
def _no_fleet_cache_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tidal simulate`` keeps fixed fleets in the user's cache folder; tests keep
    nothing there (a test of the cache names its own folder)."""
    monkeypatch.setenv("TIDAL_SIM_CACHE", "off")


@pytest.fixture
def tool_path() -> Callable[[str], str]:
    """``tool_path("nginx")`` -> absolute path, or a failure naming the package."""

    def find(name: str) -> str:
        path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
        if path is None:
            package = DEBIAN_PACKAGES.get(name, name)
            pytest.fail(
                f"{name!r} is not installed; run 'make test' as root to install it, "
                f"or 'apt-get install {package}'"
            )
        return path

    return find
