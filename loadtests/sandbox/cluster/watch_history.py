"""The write history and the watches it feeds: every write's revision, and who hears of it.

As etcd's revision, one global, increasing ``resourceVersion`` counts the
writes; :class:`WatchHistory` hands out the next one and keeps the last
``history_size`` writes, each as the object before and after, so that:

- ``watch`` from a ``resourceVersion`` replays the history after it, or
  raises 410 Gone when that version has been compacted away; with no version
  (or ``"0"``) it starts with a synthetic ADDED for every current object;
- a selector watch sees an object that stops matching as DELETED and one
  that starts matching as ADDED, as the real watch cache does;
- a watcher that falls ``max_pending`` events behind is closed, so a stuck
  client cannot grow memory without bound; it re-watches and, if needed,
  re-lists.

Watch events share one object between all watchers: never mutate an event
object. The :class:`~loadtests.sandbox.cluster.store.Store` records each
write here once it is committed; nothing else does.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from loadtests.sandbox.cluster.errors import BadRequest, Gone
from loadtests.sandbox.cluster.object_table import ObjectTable
from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.selectors import FieldSelector, LabelSelector

__all__ = ["WatchEvent", "WatchHistory", "Watcher", "WriteRecord"]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: Obj  # shared between watchers: do not mutate


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """A write as the history keeps it: the object before and after."""

    rv: int
    rtype: ResourceType
    type: str
    old: Obj | None
    new: Obj


class Watcher:
    """One watch stream. Iterate it; ``close()`` ends it."""

    def __init__(
        self,
        history: WatchHistory,
        rtype: ResourceType,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        max_pending: int,
    ) -> None:
        self._history = history
        self.rtype = rtype
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self._queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue()
        self._max_pending = max_pending
        self.closed = False
        self.overflowed = False
        # The last resourceVersion this watcher has seen (the API server's bookmarks).
        self.last_rv = 0

    def _visible(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)

    def begin_with(self, objects: list[Obj], revision: int) -> None:
        """Start from the objects as they are at ``revision``: an ADDED for each."""
        for obj in objects:
            self._put(WatchEvent("ADDED", obj))
        self.last_rv = revision

    def offer(self, record: WriteRecord) -> None:
        """A write to this watcher's type: an event if it shows through the selectors."""
        if self.closed:
            return
        was, now = self._visible(record.old), self._visible(record.new)
        if record.type == "DELETED":
            event_type = "DELETED" if was or now else None
        elif was and now:
            event_type = "MODIFIED"
        elif now:
            event_type = "ADDED"
        elif was:
            event_type = "DELETED"
        else:
            event_type = None
        self.last_rv = record.rv
        if event_type is None:
            return
        self._put(WatchEvent(event_type, record.new))

    def caught_up(self, revision: int) -> None:
        """Every write up to ``revision`` has been offered."""
        self.last_rv = max(self.last_rv, revision)

    def _put(self, event: WatchEvent) -> None:
        if self._queue.qsize() >= self._max_pending:
            # Too far behind: end the stream; the client re-watches from its
            # last version or re-lists after a 410, as with a real server.
            self.overflowed = True
            self.close()
            return
        self._queue.put_nowait(event)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._history.forget(self)
            self._queue.put_nowait(None)

    async def next(self, timeout_s: float | None = None) -> WatchEvent | None:
        """The next event; ``None`` when closed, or on timeout (the watcher stays open)."""
        if self.closed and self._queue.empty():
            return None
        if not self._queue.empty():
            event = self._queue.get_nowait()
        else:
            try:
                event = await asyncio.wait_for(self._queue.get(), timeout_s)
            except TimeoutError:
                return None
        if event is None:
            self._queue.put_nowait(None)  # keep returning None once closed
        return event

    def pending(self) -> int:
        return self._queue.qsize()

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[WatchEvent]:
        while True:
            event = await self.next()
            if event is None:
                return
            yield event


class WatchHistory:
    """The revision counter, the last writes, and the open watches they are offered to."""

    def __init__(self, table: ObjectTable, *, size: int, max_pending: int) -> None:
        # A fresh watch starts from the objects as they are: read from the table.
        self._table = table
        self._revision = 0
        self._records: deque[WriteRecord] = deque(maxlen=size)
        self._watchers: set[Watcher] = set()
        self._max_pending = max_pending

    @property
    def revision(self) -> int:
        """The revision of the last write (0 before any)."""
        return self._revision

    def next_revision(self) -> int:
        self._revision += 1
        return self._revision

    def record(self, record: WriteRecord) -> None:
        """Keep a committed write and offer it to every watch of its type."""
        self._records.append(record)
        for watcher in list(self._watchers):
            if watcher.rtype.key == record.rtype.key:
                watcher.offer(record)

    def watch(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> Watcher:
        """Start a watch. Raises Gone when ``resource_version`` is too old."""
        watcher = Watcher(
            self,
            rtype,
            namespace=namespace if rtype.namespaced else None,
            labels=labels or LabelSelector(),
            fields=fields or FieldSelector(),
            max_pending=self._max_pending,
        )
        if resource_version in (None, "", "0"):
            current = self._table.select(
                rtype, namespace=watcher.namespace, labels=watcher.labels, fields=watcher.fields
            )
            watcher.begin_with(current, self._revision)
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise BadRequest(f"invalid resource version: {resource_version!r}") from None
            oldest = self._records[0].rv if self._records else self._revision + 1
            if since < oldest - 1 and since < self._revision:
                raise Gone(f"too old resource version: {since} ({oldest - 1})")
            for record in self._records:
                if record.rv > since and record.rtype.key == rtype.key:
                    watcher.offer(record)
            watcher.caught_up(max(since, self._revision))
        self._watchers.add(watcher)
        return watcher

    def forget(self, watcher: Watcher) -> None:
        """A closed watcher hears no more writes."""
        self._watchers.discard(watcher)

    def close_watchers(self, rtype: ResourceType | None = None) -> int:
        """Cut watch streams (fault injection); returns how many were closed."""
        victims = [w for w in self._watchers if rtype is None or w.rtype.key == rtype.key]
        for watcher in victims:
            watcher.close()
        return len(victims)

    def compact(self) -> None:
        """Forget all history (fault injection: every resumed watch gets 410 Gone)."""
        self._records.clear()
