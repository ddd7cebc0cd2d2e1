"""List-then-watch one resource, forever, through disconnects and 410 Gone.

This is client-go's reflector in miniature. It lists (replacing the cache
whole), then watches from the list's ``resourceVersion`` with bookmarks and a
server-side ``timeoutSeconds`` so that a quiet stream still ends and restarts
every few minutes. When a stream ends or breaks it resumes from the last
resourceVersion it saw; when the server answers 410 Gone (that version was
compacted away) it re-lists. Any other failure (API server down, slow, 5xx)
waits with capped, jittered exponential backoff and tries again: the cache
keeps its last contents meanwhile, and callers see ``synced`` stay true.

It reads raw JSON (``_preload_content=False``) rather than kubernetes_asyncio
models: the cache needs a handful of fields, and deserializing thousands of
full objects into models per re-list costs more than the whole decision loop.
Note that kubernetes_asyncio does not check the HTTP status of an
unpreloaded response, so this module does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from scaler.kube.errors import ApiUnavailable, Gone, KubeError, error_for_status, translate

__all__ = ["RawObject", "Reflector", "check_response"]

log = logging.getLogger(__name__)

RawObject = dict[str, Any]


async def check_response(resp: Any, doing: str) -> None:
    """Raise our error for a non-2xx unpreloaded response (kubernetes_asyncio does not)."""
    status = int(resp.status)
    if 200 <= status < 300:
        return
    body = await resp.read()
    resp.release()
    try:
        message = json.loads(body).get("message", "")
    except (ValueError, AttributeError):
        message = body[:300].decode("utf-8", "replace")
    raise error_for_status(status, f"{doing}: HTTP {status}: {message}")


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
        self._what = what
        self._on_reset = on_reset
        self._on_event = on_event
        self._kwargs = dict(list_kwargs or {})
        self._watch_timeout_s = watch_timeout_s
        self._request_timeout_s = request_timeout_s
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self.synced = False
        self.relists = 0  # how many times the cache was replaced whole (tests, metrics)

    async def _list(self) -> str:
        doing = f"list {self._what}"
        try:
            resp = await self._list_call(
                **self._kwargs, _preload_content=False, _request_timeout=self._request_timeout_s
            )
            await check_response(resp, doing)
            try:
                data = json.loads(await resp.read())
            finally:
                resp.release()
        except KubeError:
            raise
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise translate(exc, doing=doing) from exc
        items = data.get("items") or []
        rv = str((data.get("metadata") or {}).get("resourceVersion", ""))
        self._on_reset(list(items))
        self.synced = True
        self.relists += 1
        return rv

    async def _watch(self, rv: str) -> str:
        doing = f"watch {self._what}"
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
                    rv = self._handle(line, rv)
            finally:
                resp.release()
        except KubeError:
            raise
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise translate(exc, doing=doing) from exc
        return rv

    def _handle(self, line: bytes, rv: str) -> str:
        if not line.strip():
            return rv
        event = json.loads(line)
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            raise error_for_status(code, f"watch {self._what}: {obj.get('message', obj)}")
        new_rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._on_event(kind, obj)
        return new_rv

    async def run(self) -> None:
        """Run until cancelled."""
        rv: str | None = None
        backoff_s = self._backoff_initial_s
        while True:
            try:
                if rv is None:
                    rv = await self._list()
                started = asyncio.get_running_loop().time()
                rv = await self._watch(rv)
                backoff_s = self._backoff_initial_s
                # A clean end resumes at once, unless streams end as soon as they
                # start (a misbehaving proxy): then do not spin.
                if asyncio.get_running_loop().time() - started >= 1.0:
                    continue
            except Gone:
                log.info(
                    "watch %s: resourceVersion %s too old (410 Gone), re-listing", self._what, rv
                )
                rv = None
                continue
            except ApiUnavailable as exc:
                log.warning(
                    "watch %s: API unavailable, retrying in %.1fs: %s", self._what, backoff_s, exc
                )
            except KubeError as exc:
                log.error("watch %s failed, retrying in %.1fs: %s", self._what, backoff_s, exc)
                rv = None  # a rejected watch may mean a bad version: re-list
            await asyncio.sleep(backoff_s * random.uniform(0.8, 1.2))
            backoff_s = min(self._backoff_max_s, backoff_s * 2)
