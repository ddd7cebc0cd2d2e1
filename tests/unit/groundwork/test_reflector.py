"""The Reflector both services use, against a fake list call (no HTTP).

Covers: a list replaces the cache and marks it synced; watch events update
it; a cut stream resumes from the last resourceVersion seen (bookmarks
included) without re-listing; a 410 Gone in the stream re-lists; a non-2xx
answer to the list is raised as our error and retried; every call asks for
raw JSON with a request timeout; the ObjectCache keys objects by
``namespace/name``; a stream that ends cleanly right after it started is
resumed at once, but a second in a row waits (in the loop's simulated time).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from groundwork.kube.reflector import ObjectCache, Reflector


def obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class FakeContent:
    def __init__(self, lines: list[bytes | BaseException], then: Callable[[], Any]) -> None:
        self._lines = lines
        self._then = then

    async def readline(self) -> bytes:
        if not self._lines:
            await self._then()
            return b""
        line = self._lines.pop(0)
        if isinstance(line, BaseException):
            raise line
        return line


class FakeResponse:
    def __init__(
        self,
        status: int,
        body: bytes = b"",
        lines: list[bytes | BaseException] | None = None,
        then: Callable[[], Any] | None = None,
    ) -> None:
        self.status = status
        self._body = body
        self.content = FakeContent(lines or [], then or _return)
        self.released = False

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        self.released = True


async def _return() -> None:
    return None


def listing(items: list[dict[str, Any]], rv: str) -> FakeResponse:
    return FakeResponse(
        200, json.dumps({"items": items, "metadata": {"resourceVersion": rv}}).encode()
    )


def event(kind: str, o: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": o}).encode() + b"\n"


async def test_lists_watches_resumes_after_a_cut_and_relists_after_gone() -> None:
    done = asyncio.get_running_loop().create_future()
    calls: list[dict[str, Any]] = []

    async def park() -> None:
        done.set_result(None)
        await asyncio.Event().wait()

    answers = [
        FakeResponse(503, b'{"message": "etcd is down"}'),  # the first list fails: retried
        listing([obj("a", "1")], "1"),
        FakeResponse(200, lines=[event("ADDED", obj("b", "2")), ConnectionResetError("cut")]),
        FakeResponse(
            200,
            lines=[
                event("BOOKMARK", {"metadata": {"resourceVersion": "3"}}),
                event("DELETED", obj("b", "4")),
                event("ERROR", {"code": 410, "message": "too old"}),
            ],
        ),
        listing([obj("a", "5"), obj("c", "5")], "5"),
        FakeResponse(200, lines=[], then=park),
    ]

    async def list_call(**kwargs: Any) -> FakeResponse:
        calls.append(kwargs)
        return answers.pop(0)

    changes: list[set[str]] = []
    cache = ObjectCache(lambda: changes.append(set(cache.store)))
    reflector = Reflector(
        list_call=list_call,
        what="things",
        on_reset=cache.reset,
        on_event=cache.event,
        list_kwargs={"namespace": "ns"},
        backoff_initial_s=0.0,
    )
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(done, 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    watched_from = [c["resource_version"] for c in calls if c.get("watch")]
    assert watched_from == ["1", "2", "5"]
    assert reflector.lists == 2
    assert reflector.synced
    assert set(cache.store) == {"ns/a", "ns/c"}
    assert changes == [{"ns/a"}, {"ns/a", "ns/b"}, {"ns/a"}, {"ns/a", "ns/c"}]
    assert all(c["namespace"] == "ns" and c["_preload_content"] is False for c in calls)
    assert all(c.get("allow_watch_bookmarks") for c in calls if c.get("watch"))


@pytest.mark.looptime
async def test_one_short_clean_stream_resumes_at_once_two_in_a_row_wait() -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    watched_at: list[float] = []

    async def park() -> None:
        done.set_result(None)
        await asyncio.Event().wait()

    answers = [
        listing([obj("a", "1")], "1"),
        FakeResponse(200),  # ends at once: a cut right after connecting
        FakeResponse(200),  # ends at once again: a proxy that closes every stream
        FakeResponse(200, then=park),
    ]

    async def list_call(**kwargs: Any) -> FakeResponse:
        if kwargs.get("watch"):
            watched_at.append(loop.time())
        return answers.pop(0)

    cache = ObjectCache(lambda: None)
    reflector = Reflector(
        list_call=list_call, what="things", on_reset=cache.reset, on_event=cache.event
    )
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(done, 60)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    first, second, third = watched_at
    assert second == first
    assert 0.4 <= third - second <= 0.6  # the initial backoff, 0.5 s +- 20 %
    assert reflector.lists == 1
