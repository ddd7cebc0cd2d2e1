"""The fake vLLM's sleep-mode endpoints, over the sleep state and the memory ledgers.

vLLM serves these only with ``--enable-sleep-mode`` and
``VLLM_SERVER_DEV_MODE=1`` (:meth:`SleepEndpoints.add_routes` checks both):

- ``POST /sleep?level=1|2``: level 1 offloads the weights to host memory
  (taken from the node's :class:`~sleep_mode.HostLedger` first: a sleep
  that does not fit is refused with a 500 and the server stays awake),
  level 2 drops them; either frees the KV cache. A server with requests
  running or waiting refuses (409);
- ``POST /wake_up`` (``tags=weights``, ``tags=kv_cache``, none: both):
  takes the GPU memory back first (a wake that does not fit the GPU's
  ledger fails at once), then waits the modelled time; the weights' wake
  after a level-1 sleep gives their host memory back;
- ``GET /is_sleeping``: ``{"is_sleeping": bool}``, true until every part is back;
- ``POST /collective_rpc`` with ``{"method": "reload_weights"}`` (after a
  level-2 sleep) and ``POST /reset_prefix_cache``.

``vllm:engine_sleep_state{sleep_state=awake|weights_offloaded|discard_all}``
(1 for the current state, 0 for the others) is on ``/metrics`` with sleep
mode on, as vLLM has it: the level shows there, and in ``/sandbox/gpu``
(``sleep_level``, ``host_mib``).

Main decision: one lock orders sleeps, wakes and reloads, so a wake never
sees a sleep half done; the state machine and its timings are
:mod:`~loadtests.sandbox.servers.sleep_mode`'s, this module only
translates HTTP and holds the ledgers.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from aiohttp import web
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from loadtests.sandbox.servers.sleep_mode import (
    GpuLedger,
    HostLedger,
    SleepError,
    SleepMachine,
    SleepParams,
    parse_tags,
)
from loadtests.sandbox.servers.vllm_errors import error_response

__all__ = ["SLEEP_STATES", "SleepEndpoints", "SleepStateCollector"]

SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


class SleepStateCollector(Collector):
    """``vllm:engine_sleep_state``: 1 for the state the server is in, 0 for the others."""

    def __init__(self, machine: SleepMachine, model: str) -> None:
        self.machine = machine
        self.model = model

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; "
            "awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; "
            "discard_all = 1 means sleep level 2.",
            labels=["model_name", "sleep_state"],
        )
        current = self.machine.state
        for state in SLEEP_STATES:
            family.add_metric([self.model, state], 1.0 if state == current else 0.0)
        yield family


class SleepEndpoints:
    """Sleep, wake and reload, each under one lock, with the GPU's and the node's ledgers."""

    def __init__(
        self,
        params: SleepParams,
        *,
        gpu_ledger_dir: str | None,
        host_ledger_dir: str | None,
        host_memory_mib: int,
        busy: Callable[[], bool],
        pause: Callable[[float], Awaitable[None]],
        reset_prefix_cache: Callable[[], None],
    ) -> None:
        self.machine = SleepMachine(params)
        self.gpu = GpuLedger(
            Path(gpu_ledger_dir) if gpu_ledger_dir else None, budget_mib=params.gpu_memory_mib
        )
        self.host = HostLedger(
            Path(host_ledger_dir) if host_ledger_dir else None, budget_mib=host_memory_mib
        )
        self._busy = busy
        self._pause = pause
        self._reset_prefix_cache = reset_prefix_cache
        self._lock = asyncio.Lock()

    def add_routes(self, app: web.Application, *, enabled: bool) -> None:
        """The dev endpoints, when the flag and ``VLLM_SERVER_DEV_MODE=1`` both ask for them."""
        if not (enabled and os.environ.get("VLLM_SERVER_DEV_MODE") == "1"):
            return
        app.router.add_post("/sleep", self.sleep)
        app.router.add_post("/wake_up", self.wake_up)
        app.router.add_get("/is_sleeping", self.is_sleeping)
        app.router.add_post("/collective_rpc", self.collective_rpc)
        app.router.add_post("/reset_prefix_cache", self.reset_prefix_cache)

    def start(self) -> None:
        # The engine takes its memory when it comes up. A cold start is not
        # refused for want of memory: the sandbox's scheduler places by device,
        # and only wakes are checked against the GPU's budget.
        self.gpu.set(self.machine.gpu_mib(), check=False)

    def stop(self) -> None:
        self.gpu.release()
        self.host.release()

    async def sleep(self, request: web.Request) -> web.Response:
        raw = request.query.get("level", "1")
        try:
            level = int(raw)
        except ValueError:
            return error_response(f"level must be 1 or 2; got {raw!r}", status=400)
        async with self._lock:
            try:
                if not self._busy():
                    # Room in host memory first: a level-1 sleep that does not fit is refused.
                    self.host.set(self.machine.sleep_host_mib(level), check=True)
                seconds = self.machine.sleep(level, busy=self._busy())
            except SleepError as e:
                self.host.set(self.machine.host_mib(), check=False)
                return error_response(str(e), status=e.status)
            await self._pause(seconds)
            self.gpu.set(self.machine.gpu_mib(), check=False)
        return web.Response(status=200)

    async def wake_up(self, request: web.Request) -> web.Response:
        try:
            tags = parse_tags(request.query.getall("tags", []))
        except SleepError as e:
            return error_response(str(e), status=e.status, param="tags")
        async with self._lock:
            mib, seconds = self.machine.wake_cost(tags)
            if mib:
                try:
                    # Take the memory first: a wake that does not fit fails at once.
                    self.gpu.set(self.machine.gpu_mib() + mib, check=True)
                except SleepError as e:
                    return error_response(str(e), status=e.status)
            await self._pause(seconds)
            self.machine.woke(tags)
            self.host.set(self.machine.host_mib(), check=False)
        return web.Response(status=200)

    async def is_sleeping(self, request: web.Request) -> web.Response:
        return web.json_response({"is_sleeping": self.machine.sleeping})

    async def collective_rpc(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error_response("the request body is not valid JSON", status=400)
        method = body.get("method") if isinstance(body, dict) else None
        if method != "reload_weights":
            return error_response(
                f"this fake vLLM's collective_rpc knows method 'reload_weights' only; "
                f"got {method!r}",
                status=400,
                param="method",
            )
        async with self._lock:
            try:
                await self._pause(self.machine.reload_weights())
            except SleepError as e:
                return error_response(str(e), status=e.status)
        return web.json_response({"results": [None]})

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        self._reset_prefix_cache()
        return web.Response(status=200)
