"""List-then-watch one resource, forever, through disconnects and 410 Gone.

This is client-go's reflector in miniature, and the one both services use
(the scaler for Deployments, pods, Nodes and spot companions; the activator
for Deployments, Services, EndpointSlices and Nodes). It lists (replacing
the cache whole), then watches from the list's ``resourceVersion`` with
bookmarks and a server-side ``timeoutSeconds`` so that a quiet stream still
ends and restarts every few minutes. When a stream ends or breaks it resumes
from the last resourceVersion it saw; when the server answers 410 Gone (that
version was compacted away) it re-lists. Any other failure (API server down,
slow, 5xx) waits with capped, jittered exponential backoff and tries again:
the cache keeps its last contents meanwhile, and callers see ``synced`` stay
true. A rejected list or watch (4xx other than 410) re-lists after the
backoff, since a bad version may be the cause.

The caller gets two callbacks, ``on_reset(items)`` after each list and
``on_event(kind, obj)`` for each ADDED, MODIFIED or DELETED, and builds
whatever index it needs; :class:`ObjectCache` is the plain one, a dict by
``namespace/name`` with a change callback.

It reads raw JSON (``_preload_content=False``) rather than kubernetes_asyncio
models: the cache needs a handful of fields, and deserializing thousands of
full objects into models per re-list costs more than the whole decision loop.
:mod:`groundwork.kube.raw` makes the calls and checks their HTTP status.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from groundwork.kube.errors import ApiUnavailable, Gone, KubeError, error_for_status, translate
from groundwork.kube.raw import RawObject, call_json, check_response

__all__ = ["ObjectCache", "RawObject", "Reflector", "object_key"]

log = logging.getLogger(__name__)


class Reflector:
    """Keeps a cache of one resource in step with the API server."""

    def __init__(
        self,
        *,
        list_call: Callable[..., Awaitable[Any]],
        what: str,
        on_reset: Callable[[list[RawObject]], None],
        on_event: Callable[[str, RawObject], None],
        list_kwargs: dict[str, Any] | None = None,
        watch_timeout_s: int = 300,
        request_timeout_s: float = 30.0,
        backoff_initial_s: float = 0.5,
        # client-go's reflectors cap at 30 s; the scaler's view of ready pods
        # drives decisions, so after an API outage it must catch up within
        # seconds, and a handful of watches retrying every 5 s is no load.
        backoff_max_s: float = 5.0,
    ) -> None:
        self._list_call = list_call
        self.what = what
        self._on_reset = on_reset
        self._on_event = on_event
        self._kwargs = dict(list_kwargs or {})
        self._watch_timeout_s = watch_timeout_s
        self._request_timeout_s = request_timeout_s
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self.synced = False
        self.lists = 0  # how many times the cache was replaced whole (tests, metrics)
        self._rv: str | None = None  # where the next watch starts; None: list first

    async def _list(self) -> str:
        data = await call_json(
            self._list_call,
            doing=f"list {self.what}",
            request_timeout_s=self._request_timeout_s,
            **self._kwargs,
        )
        items = data.get("items") or []
        rv = str((data.get("metadata") or {}).get("resourceVersion", ""))
        self._on_reset(list(items))
        self.synced = True
        self.lists += 1
        return rv

    async def _watch(self, rv: str) -> None:
        """Watch from ``rv``; :attr:`_rv` follows every event, so a cut stream
        resumes from the last version seen rather than replaying the stream."""
        doing = f"watch {self.what}"
        timeout = aiohttp.ClientTimeout(
            sock_connect=self._request_timeout_s, sock_read=self._watch_timeout_s + 30
        )
        try:
            resp = await self._list_call(
                **self._kwargs,
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=self._watch_timeout_s,
                _preload_content=False,
                _request_timeout=timeout,
            )
            await check_response(resp, doing)
            try:
                while line := await resp.content.readline():
                    self._handle(line)
            finally:
                resp.release()
        except KubeError:
            raise
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise translate(exc, doing=doing) from exc

    def _handle(self, line: bytes) -> None:
        if not line.strip():
            return
        event = json.loads(line)
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            raise error_for_status(code, f"watch {self.what}: {obj.get('message', obj)}")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._on_event(kind, obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self._rv = str(rv)

    async def run(self) -> None:
        """Run until cancelled."""
        self._rv = None
        backoff_s = self._backoff_initial_s
        quick_ends = 0  # clean ends in a row, each within a second of its start
        loop = asyncio.get_running_loop()
        while True:
            try:
                if self._rv is None:
                    self._rv = await self._list()
                started = loop.time()
                await self._watch(self._rv)
                backoff_s = self._backoff_initial_s
                quick_ends = quick_ends + 1 if loop.time() - started < 1.0 else 0
                # A clean end resumes at once, even a short one (a stream cut right
                # after it started); streams that keep ending as soon as they start
                # (a misbehaving proxy) wait between tries, so as not to spin.
                if quick_ends < 2:
                    continue
            except Gone:
                log.info(
                    "watch %s: resourceVersion %s too old (410 Gone), re-listing",
                    self.what,
                    self._rv,
                )
                self._rv = None
                continue
            except ApiUnavailable as exc:
                log.warning(
                    "watch %s: API unavailable, retrying in %.1fs: %s", self.what, backoff_s, exc
                )
            except KubeError as exc:
                log.error("watch %s failed, retrying in %.1fs: %s", self.what, backoff_s, exc)
                self._rv = None  # a rejected watch may mean a bad version: re-list
            await asyncio.sleep(backoff_s * random.uniform(0.8, 1.2))
            backoff_s = min(self._backoff_max_s, backoff_s * 2)


def object_key(obj: RawObject) -> str:
    """``namespace/name`` of a raw object (``/name`` for cluster-scoped ones)."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class ObjectCache:
    """The raw objects a :class:`Reflector` keeps, by ``namespace/name``.

    Pass :meth:`reset` and :meth:`event` as the reflector's ``on_reset`` and
    ``on_event``; ``on_change`` runs after every change (a whole list, or one
    event).
    """

    def __init__(self, on_change: Callable[[], None]) -> None:
        self.store: dict[str, RawObject] = {}
        self._on_change = on_change

    def reset(self, items: list[RawObject]) -> None:
        self.store = {object_key(o): o for o in items}
        self._on_change()

    def event(self, kind: str, obj: RawObject) -> None:
        if kind == "DELETED":
            self.store.pop(object_key(obj), None)
        else:
            self.store[object_key(obj)] = obj
        self._on_change()
