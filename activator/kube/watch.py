"""A list-then-watch loop that survives disconnects and ``410 Gone``.

:class:`Reflector` keeps a local copy of one kind of object (by
``namespace/name``) the way client-go's reflector does:

1. *list*, replacing the whole store, and remember the list's
   ``resourceVersion``;
2. *watch* from that version, applying ADDED/MODIFIED/DELETED and moving the
   version forward on every event and BOOKMARK;
3. when the watch ends (the server's ``timeoutSeconds``, a dropped
   connection, an API error) watch again from the last version, after a
   backoff if it failed;
4. when the server answers ``410 Gone`` (the version is too old to resume
   from), go back to 1.

The lister and watcher are plain callables, so the loop is tested with fakes;
:mod:`activator.kube.source` binds them to kubernetes_asyncio.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

__all__ = ["Gone", "Lister", "Reflector", "Watcher"]

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]
Lister = Callable[[], Awaitable[tuple[list[Obj], str]]]
Watcher = Callable[[str], AsyncIterator[Obj]]  # events: {"type": ..., "object": {...}}

BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class Gone(Exception):
    """410: the resource version is too old; list again."""


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _version(obj: Obj) -> str | None:
    meta = obj.get("metadata") or {}
    rv = meta.get("resourceVersion")
    return str(rv) if rv else None


class Reflector:
    """Local store of one kind of object, kept current by list + watch."""

    def __init__(
        self,
        kind: str,
        *,
        lister: Lister,
        watcher: Watcher,
        on_change: Callable[[], None],
        backoff_s: tuple[float, ...] = BACKOFF_S,
    ) -> None:
        self.kind = kind
        self.lister = lister
        self.watcher = watcher
        self.on_change = on_change
        self.backoff_s = backoff_s
        self.store: dict[str, Obj] = {}
        self.synced = asyncio.Event()
        self.lists = 0
        self.watches = 0

    async def run(self) -> None:
        version: str | None = None
        failures = 0
        while True:
            try:
                if version is None:
                    items, version = await self.lister()
                    self.store = {_key(o): o for o in items}
                    self.lists += 1
                    self.synced.set()
                    self.on_change()
                self.watches += 1
                async for event in self.watcher(version):
                    version = self._apply(event) or version
                    failures = 0
                failures = 0
            except Gone:
                log.info("%s watch: resource version %s expired; listing again", self.kind, version)
                version = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.backoff_s[min(failures, len(self.backoff_s) - 1)]
                failures += 1
                log.warning("%s watch failed (%r); retrying in %.1fs", self.kind, exc, delay)
                await asyncio.sleep(delay)

    def _apply(self, event: Obj) -> str | None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise RuntimeError(f"watch error: {obj.get('message', obj)}")
        version = _version(obj)
        if kind == "BOOKMARK":
            return version
        key = _key(obj)
        if kind in ("ADDED", "MODIFIED"):
            self.store[key] = obj
        elif kind == "DELETED":
            self.store.pop(key, None)
        else:
            return version
        self.on_change()
        return version
