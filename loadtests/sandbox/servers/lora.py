"""LoRA adapters in the fake vLLM, as vLLM serves them.

vLLM's behaviour, which this module imitates (``vllm/entrypoints/openai/
serving_models.py``, ``vllm/lora/worker_manager.py``, its metrics docs):

- ``--enable-lora`` turns adapters on; ``--lora-modules name=path ...``
  loads some at start; with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=true`` in the
  environment, ``POST /v1/load_lora_adapter`` (``{"lora_name", "lora_path"}``)
  and ``POST /v1/unload_lora_adapter`` (``{"lora_name"}``) exist; without it
  they are not routes at all (404 ``{"detail": "Not Found"}``, FastAPI's).
  Success is ``200`` with a plain-text sentence. Errors are vLLM's
  ``ErrorResponse``: a missing name or path and an adapter already loaded are
  ``400 InvalidUserInput``; a path with no adapter is ``404 NotFoundError``;
  unloading an unknown adapter is ``404 NotFoundError``; loading with LoRA
  off is ``400 BadRequestError``.
- ``GET /v1/models`` lists each loaded adapter with ``root`` (its path) and
  ``parent`` (the base model); a request whose ``model`` names an adapter
  that is not loaded is a 404, like any unknown model.
- ``--max-loras`` is the number of distinct adapters in one running batch: a
  request for another adapter waits until one of them has no request
  running. ``--max-cpu-loras`` (default: ``--max-loras``; never fewer) is the
  host-memory cache: loading past it evicts the least recently used adapter
  from memory silently, as vLLM's worker does; it stays listed, and its next
  request reads it again (the load time once more).
- ``vllm:lora_requests_info`` is a gauge whose value is the wall-clock time
  and whose labels carry ``max_lora`` and the comma-separated names of the
  adapters with requests ``running_lora_adapters`` and
  ``waiting_lora_adapters``.

Not vLLM's: a path counts as "an adapter is there" when it is a hub-style id
(``org/name``, no leading ``/`` or ``.``) or an existing directory, so tests
provoke the 404 with a local path that does not exist; reading an adapter
takes ``--lora-load-time`` of model time.

Main decision: vLLM never refuses a load for want of slots (it evicts from
host memory, and a batch-full adapter waits), so this fake does not either;
"slots full" is what a router must infer from ``max_lora`` and the running
adapters, which is why the metric is kept exact here.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "RUNTIME_UPDATING_ENV",
    "LoraEndpoints",
    "LoraError",
    "LoraParams",
    "LoraState",
    "model_permission",
    "parse_lora_module",
]

RUNTIME_UPDATING_ENV = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]*")


def parse_lora_module(text: str) -> tuple[str, str]:
    """``name=path`` (vLLM's ``--lora-modules`` form; its JSON form is not taken here)."""
    name, sep, path = text.partition("=")
    name, path = name.strip(), path.strip()
    if not sep or not _NAME.fullmatch(name) or not path:
        raise ValueError(f"a LoRA module is name=path, such as sql-lora=org/sql-lora; got {text!r}")
    return name, path


@dataclass(frozen=True, slots=True)
class LoraParams:
    """``--enable-lora``, ``--max-loras``, ``--max-cpu-loras``, ``--lora-modules``, load time."""

    enable_lora: bool = False
    max_loras: int = 1  # vLLM's default
    max_cpu_loras: int | None = None  # None: max_loras, as vLLM
    lora_modules: tuple[tuple[str, str], ...] = ()
    load_time_s: float = 0.5
    allow_runtime_updating: bool = False

    def __post_init__(self) -> None:
        if self.max_loras < 1:
            raise ValueError(f"max_loras must be >= 1; got {self.max_loras}")
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(
                f"max_cpu_loras ({self.max_cpu_loras}) must be >= max_loras ({self.max_loras})"
            )
        if self.load_time_s < 0:
            raise ValueError(f"LoRA load time must be >= 0 s; got {self.load_time_s}")
        if self.lora_modules and not self.enable_lora:
            raise ValueError("--lora-modules needs --enable-lora")

    @property
    def host_slots(self) -> int:
        return self.max_loras if self.max_cpu_loras is None else self.max_cpu_loras

    @staticmethod
    def runtime_updating_from_env() -> bool:
        """vLLM reads the variable as a boolean: ``1`` or ``true`` (any case)."""
        return os.environ.get(RUNTIME_UPDATING_ENV, "").strip().lower() in ("1", "true")


class LoraError(Exception):
    """A refusal in vLLM's ``ErrorResponse`` terms."""

    def __init__(self, message: str, *, status: int, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind

    def response(self) -> web.Response:
        body = {"object": "error", "message": str(self), "type": self.kind, "param": None}
        return web.json_response({**body, "code": self.status}, status=self.status)


def _adapter_exists(path: str) -> bool:
    if path.startswith(("/", ".", "~")):
        return Path(path).expanduser().is_dir()
    return True  # a hub id: the fake "downloads" it


class LoraState:
    """Loaded adapters, the host-memory cache and the running batch's adapters."""

    def __init__(self, params: LoraParams, *, sleep: Callable[[float], Awaitable[None]]) -> None:
        self.params = params
        self._sleep = sleep
        self.loaded: dict[str, str] = {}  # name -> path, in load order (vLLM's list)
        self._in_memory: OrderedDict[str, None] = OrderedDict()  # LRU order, oldest first
        self.running: Counter[str] = Counter()
        self.waiting: Counter[str] = Counter()
        self._batch = asyncio.Condition()
        self.loads = 0  # adapter reads from "disk", for tests and the story
        # --lora-modules are read while the server starts (its start-up delay covers them).
        for name, path in params.lora_modules:
            self.loaded[name] = path
            self._in_memory[name] = None

    def serves(self, name: str) -> bool:
        return name in self.loaded

    async def load(self, name: str, path: str) -> None:
        if not self.params.enable_lora:
            raise LoraError(
                "LoRA is not enabled. Use --enable-lora to enable LoRA.",
                status=400,
                kind="BadRequestError",
            )
        if not name or not path:
            raise LoraError(
                "Both 'lora_name' and 'lora_path' must be provided.",
                status=400,
                kind="InvalidUserInput",
            )
        if name in self.loaded:
            raise LoraError(
                f"The lora adapter '{name}' has already been loaded.",
                status=400,
                kind="InvalidUserInput",
            )
        if not _adapter_exists(path):
            raise LoraError(
                f"Loading lora {name} failed: No adapter found for {path}",
                status=404,
                kind="NotFoundError",
            )
        await self._read(name)
        self.loaded[name] = path

    def unload(self, name: str) -> None:
        if name not in self.loaded:
            raise LoraError(
                f"The lora adapter '{name}' cannot be found.", status=404, kind="NotFoundError"
            )
        del self.loaded[name]
        self._in_memory.pop(name, None)

    async def _read(self, name: str) -> None:
        await self._sleep(self.params.load_time_s)
        self.loads += 1
        self._in_memory[name] = None
        self._in_memory.move_to_end(name)
        while len(self._in_memory) > self.params.host_slots:
            self._in_memory.popitem(last=False)  # evicted from memory, still listed

    async def admit(self, name: str) -> None:
        """Wait for a place in the batch for ``name`` (``--max-loras`` distinct adapters)."""
        self.waiting[name] += 1
        try:
            async with self._batch:
                await self._batch.wait_for(
                    lambda: name in self.running or len(self.running) < self.params.max_loras
                )
                self.running[name] += 1
        finally:
            self.waiting[name] -= 1
            if not self.waiting[name]:
                del self.waiting[name]
        if name not in self._in_memory:
            try:
                await self._read(name)  # evicted from host memory: read it again
            except BaseException:
                await self.release(name)
                raise
        self._in_memory.move_to_end(name)

    async def release(self, name: str) -> None:
        async with self._batch:
            self.running[name] -= 1
            if not self.running[name]:
                del self.running[name]
            self._batch.notify_all()

    def cards(self, *, parent: str, created: int) -> list[dict[str, Any]]:
        """``GET /v1/models`` entries of the loaded adapters, as vLLM lists them."""
        return [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": path,
                "parent": parent,
                "max_model_len": None,
                "permission": [model_permission(created)],
            }
            for name, path in self.loaded.items()
        ]


def model_permission(created: int) -> dict[str, Any]:
    """The ``permission`` entry vLLM gives every model card (its ModelPermission defaults)."""
    return {
        "id": f"modelperm-{uuid.uuid4().hex}",
        "object": "model_permission",
        "created": created,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }


class LoraInfoCollector(Collector):
    """``vllm:lora_requests_info``: labels carry the state, the value is the time."""

    def __init__(self, state: LoraState) -> None:
        self._state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "vllm:lora_requests_info",
            "Running stats on lora requests.",
            labels=["running_lora_adapters", "max_lora", "waiting_lora_adapters"],
        )
        family.add_metric(
            [
                ",".join(sorted(self._state.running)),
                str(self._state.params.max_loras),
                ",".join(sorted(self._state.waiting)),
            ],
            time.time(),
        )
        yield family


class LoraEndpoints:
    """``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``, when vLLM would have them."""

    def __init__(self, state: LoraState) -> None:
        self.state = state

    def add_routes(self, app: web.Application) -> None:
        if not self.state.params.allow_runtime_updating:
            # vLLM registers them only with VLLM_ALLOW_RUNTIME_LORA_UPDATING:
            # without it, FastAPI's answer to a path it does not know.
            app.router.add_post("/v1/load_lora_adapter", _not_found)
            app.router.add_post("/v1/unload_lora_adapter", _not_found)
            return
        app.router.add_post("/v1/load_lora_adapter", self.load)
        app.router.add_post("/v1/unload_lora_adapter", self.unload)

    async def load(self, request: web.Request) -> web.Response:
        try:
            body = await _body(request)
            name, path = str(body.get("lora_name") or ""), str(body.get("lora_path") or "")
            await self.state.load(name, path)
        except LoraError as e:
            return e.response()
        return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")

    async def unload(self, request: web.Request) -> web.Response:
        try:
            body = await _body(request)
            name = str(body.get("lora_name") or "")
            if not name:
                raise LoraError(
                    "either 'lora_name' and 'lora_int_id' needs to be provided.",
                    status=400,
                    kind="InvalidUserInput",
                )
            self.state.unload(name)
        except LoraError as e:
            return e.response()
        return web.Response(text=f"Success: LoRA adapter '{name}' removed successfully.")


async def _not_found(request: web.Request) -> web.Response:
    return web.json_response({"detail": "Not Found"}, status=404)


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise LoraError(
            "the request body is not valid JSON", status=400, kind="BadRequestError"
        ) from None
    if not isinstance(body, dict):
        raise LoraError(
            "the request body must be a JSON object", status=400, kind="BadRequestError"
        )
    return body
