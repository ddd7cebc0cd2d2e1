"""The API server's faults, acted on: the switches set, the listener closed, watches cut.

:class:`~loadtests.sandbox.cluster.faults.Faults` holds the switches and
decides what a request meets; this part acts on them: a server made
unavailable with ``refuse_connections`` closes its listener
(:mod:`.listener`) and opens it again when the fault's time is over, or at
once when the faults are lifted; every fault that makes the server
unavailable also cuts the open watch streams (:mod:`.open_watches`), and a
cut with ``compact`` drops the history so resumed watches get 410 Gone. It
also serves ``/_sandbox/faults``, which sets them over HTTP (admin token
only; ``GET`` describes them, ``POST`` sets them, ``DELETE`` lifts them).

Main decision: the faults live on the event loop's clock, the one the
middleware reads, so a fault's end and the requests it refuses agree.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from loadtests.sandbox.cluster.apiserver.listener import Listener
from loadtests.sandbox.cluster.apiserver.open_watches import OpenWatches
from loadtests.sandbox.cluster.apiserver.wire import json_response
from loadtests.sandbox.cluster.errors import BadRequest, MethodNotAllowed
from loadtests.sandbox.cluster.faults import Faults
from loadtests.sandbox.cluster.store import Store

__all__ = ["FaultControl"]

# What a POST to /_sandbox/faults may set.
_SETTINGS = frozenset(
    {"unavailable_s", "refuse_connections", "latency_s", "slow_s", "cut_watches", "compact"}
)


class FaultControl:
    """The faults of one API server, and what they do to it."""

    def __init__(self, store: Store, watches: OpenWatches) -> None:
        self.switches = Faults()
        self._store = store
        self._watches = watches
        self._listener: Listener | None = None
        self._restore_task: asyncio.Task[None] | None = None

    @staticmethod
    def now() -> float:
        return asyncio.get_running_loop().time()

    def serve_on(self, listener: Listener | None) -> None:
        """The listener a refusing fault closes (None: the server stopped)."""
        self._listener = listener

    async def make_unavailable(
        self, duration_s: float, *, refuse_connections: bool = False
    ) -> None:
        """503 to every request (or refuse connections) for ``duration_s``; cuts watches."""
        self.switches.make_unavailable(
            now=self.now(), duration_s=duration_s, refuse=refuse_connections
        )
        self.cut_watches()
        if refuse_connections and self._listener is not None and self._listener.is_open:
            await self._listener.close()
            if self._restore_task is not None:
                self._restore_task.cancel()
            self._restore_task = asyncio.create_task(
                self._restore_after(duration_s), name="apiserver-reopen"
            )

    async def _restore_after(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._restore_task = None
        await self.restore()

    async def restore(self) -> None:
        """Lift every fault now (and open the listener again if it was closed)."""
        self.switches.clear()
        if self._restore_task is not None and self._restore_task is not asyncio.current_task():
            self._restore_task.cancel()
            self._restore_task = None
        if self._listener is not None and not self._listener.is_open:
            await self._listener.open()

    async def stop(self) -> None:
        """The server stops: no listener to open again."""
        if self._restore_task is not None:
            self._restore_task.cancel()
            await asyncio.gather(self._restore_task, return_exceptions=True)
            self._restore_task = None
        self._listener = None

    def slow_down(self, *, latency_s: float, duration_s: float) -> None:
        self.switches.slow_down(now=self.now(), latency_s=latency_s, duration_s=duration_s)

    def cut_watches(self, *, compact: bool = False) -> int:
        """End every watch stream the server serves; ``compact`` also drops history."""
        if compact:
            self._store.compact()
        return self._watches.cut()

    async def serve(self, request: web.Request) -> web.Response:
        """``/_sandbox/faults``: describe (GET), set (POST) or lift (DELETE) the faults."""
        if request.method == "DELETE":
            await self.restore()
        elif request.method == "POST":
            await self._set(await _settings(request))
        elif request.method != "GET":
            raise MethodNotAllowed("GET, POST or DELETE /_sandbox/faults")
        return json_response(self.switches.describe(self.now()))

    async def _set(self, body: dict[str, Any]) -> None:
        try:
            if body.get("latency_s") is not None:
                self.slow_down(
                    latency_s=float(body["latency_s"]), duration_s=float(body.get("slow_s", 60))
                )
            if body.get("cut_watches") or body.get("compact"):
                self.cut_watches(compact=bool(body.get("compact")))
            if body.get("unavailable_s") is not None:
                await self.make_unavailable(
                    float(body["unavailable_s"]),
                    refuse_connections=bool(body.get("refuse_connections")),
                )
        except (TypeError, ValueError) as error:
            raise BadRequest(f"bad fault settings: {error}") from None


async def _settings(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as error:
        raise BadRequest(f"the faults body must be JSON: {error}") from None
    if not isinstance(body, dict):
        raise BadRequest("the faults body must be a JSON object")
    unknown = set(body) - _SETTINGS
    if unknown:
        raise BadRequest(f"unknown fault settings {sorted(unknown)}; allowed: {sorted(_SETTINGS)}")
    return body
