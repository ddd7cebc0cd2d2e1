"""What an engine flavour (vLLM-like, Triton-like) and the server agree on.

:class:`ServerConfig` is one fake model server's settings; :class:`EngineApp`
is what a flavour gives the server (its aiohttp app, engine start/stop,
readiness, GPU busy time); :class:`RuntimeApp` is the part every flavour
shares. The flavours (``vllm``, ``triton``) build on this module and the
server (``server``) picks one of them, so the dependency runs one way:
server -> flavours -> this module.

Main decision: the configuration is validated when it is built, so a bad
flag fails at start-up with a message naming the value and what is allowed,
not later inside a running engine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from aiohttp import web

from loadtests.sandbox.servers.engine_runtime import ModelClock
from loadtests.sandbox.servers.faults import Faults
from loadtests.sandbox.servers.lora import LoraParams
from loadtests.sandbox.servers.prompt_blocks import DEFAULT_BLOCK_SIZE
from loadtests.sandbox.servers.sleep_mode import SleepParams
from simulator.engine import BatcherParams, LlmParams

__all__ = ["EngineApp", "EngineRuntime", "RuntimeApp", "ServerConfig"]


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything one fake model server needs (``tidal sandbox model-server`` flags)."""

    engine: Literal["vllm", "triton"] = "vllm"
    model: str = "llama-3.1-8b"
    host: str = "127.0.0.1"
    port: int = 8000
    startup_delay_s: float = 0.0
    # Model time runs this many times faster than wall time (tests: 10-1000).
    speedup: float = 1.0
    # Prefix-cache blocks of vLLM's default block size (the engine model's own
    # default is the Mooncake traces' 512).
    llm: LlmParams = field(
        default_factory=lambda: LlmParams(prefix_block_tokens=DEFAULT_BLOCK_SIZE)
    )
    batcher: BatcherParams = field(default_factory=BatcherParams)
    faults: Faults = field(default_factory=Faults)
    # When a request does not set ignore_eos, its natural length is drawn from
    # an exponential distribution with this mean (ShareGPT's average output is
    # 179 tokens, per the vLLM v0.6.0 blog), capped by max_tokens.
    mean_output_tokens: float = 179.0
    max_model_len: int = 131_072
    drain_timeout_s: float = 120.0
    seed: int | None = None
    # vLLM's --enable-sleep-mode (the endpoints also need VLLM_SERVER_DEV_MODE=1).
    enable_sleep_mode: bool = False
    sleep: SleepParams = field(default_factory=SleepParams)
    # The shared ledger of the physical GPU this server runs on (see sleep_mode).
    gpu_ledger_dir: str | None = None
    # The node's host memory, shared by its servers: what level-1 sleepers take.
    host_ledger_dir: str | None = None
    host_memory_mib: int = 0  # 0: no limit
    # The GPU device the server was given (--gpu-shape), None: the reference GPU.
    device: str | None = None
    # LoRA adapters (vLLM only): --enable-lora, --max-loras, --lora-modules ...
    lora: LoraParams = field(default_factory=LoraParams)
    # vLLM's --kv-events-config enable_kv_cache_events: serve GET /kv_events.
    kv_events: bool = False

    def __post_init__(self) -> None:
        if self.engine not in ("vllm", "triton"):
            raise ValueError(f"engine must be 'vllm' or 'triton'; got {self.engine!r}")
        if not self.model or any(c.isspace() for c in self.model):
            raise ValueError(f"model must be a non-empty name without spaces; got {self.model!r}")
        if not (0 <= self.port <= 65535):
            raise ValueError(f"port must be 0..65535; got {self.port}")
        if self.startup_delay_s < 0:
            raise ValueError(f"startup delay must be >= 0 s; got {self.startup_delay_s}")
        if not self.speedup > 0:
            raise ValueError(f"speedup must be > 0; got {self.speedup}")
        if not self.mean_output_tokens >= 1:
            raise ValueError(f"mean output tokens must be >= 1; got {self.mean_output_tokens}")
        if self.max_model_len < 2:
            raise ValueError(f"max model length must be >= 2 tokens; got {self.max_model_len}")
        if self.drain_timeout_s < 0:
            raise ValueError(f"drain timeout must be >= 0 s; got {self.drain_timeout_s}")
        if self.host_memory_mib < 0:
            raise ValueError(f"host memory must be >= 0 MiB; got {self.host_memory_mib}")


class EngineApp(Protocol):
    """What an engine flavour (vLLM-like, Triton-like) gives the server."""

    listen_before_ready: bool

    @property
    def app(self) -> web.Application: ...

    def start_engine(self) -> None: ...

    async def stop_engine(self) -> None: ...

    def mark_ready(self) -> None: ...

    def busy_time_s(self) -> float:
        """Model-time seconds the simulated GPU has been busy."""
        ...

    def model_time_s(self) -> float: ...


class EngineRuntime(Protocol):
    """The engine loop behind an app (``LlmRuntime``, ``BatchRuntime``)."""

    clock: ModelClock

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def busy_time_s(self) -> float: ...


RuntimeT = TypeVar("RuntimeT", bound=EngineRuntime)


class RuntimeApp(Generic[RuntimeT]):
    """The part of :class:`EngineApp` every flavour shares: it delegates to its runtime.

    A flavour builds its runtime and its routes, then calls ``__init__``; it
    routes ``GET /sandbox/gpu`` to :meth:`gpu` (read by the DCGM-like exporter).
    """

    listen_before_ready: bool

    def __init__(self, *, app: web.Application, runtime: RuntimeT) -> None:
        self._app = app
        self.runtime = runtime
        self._ready = False

    @property
    def app(self) -> web.Application:
        return self._app

    def start_engine(self) -> None:
        self.runtime.start()

    async def stop_engine(self) -> None:
        await self.runtime.stop()

    def mark_ready(self) -> None:
        self._ready = True

    def busy_time_s(self) -> float:
        return self.runtime.busy_time_s()

    def model_time_s(self) -> float:
        return self.runtime.clock.now()

    def fb_used_mib(self) -> int | None:
        """GPU memory this server holds, MiB (None: the flavour does not model it)."""
        return None

    def fb_total_mib(self) -> int | None:
        """Memory of the physical GPU this server runs on, MiB (None: not modelled)."""
        return None

    def sandbox_state(self) -> dict[str, float | int | str]:
        """More of the flavour's state for ``GET /sandbox/gpu`` (sleep level, device)."""
        return {}

    async def gpu(self, request: web.Request) -> web.Response:
        body: dict[str, float | int | str] = {
            "busy_s": self.busy_time_s(),
            "model_time_s": self.model_time_s(),
        }
        used = self.fb_used_mib()
        if used is not None:
            body["fb_used_mib"] = used
        total = self.fb_total_mib()
        if total:
            body["fb_total_mib"] = total
        # Which physical GPU, when the kubelet placed this server on a shared one.
        index = os.environ.get("TIDAL_SANDBOX_GPU_INDEX")
        devices = os.environ.get("NVIDIA_VISIBLE_DEVICES", "")
        if index is not None and index.isdigit() and devices.startswith(("GPU-", "MIG-")):
            body["gpu"] = int(index)
            body["uuid"] = devices
        body.update(self.sandbox_state())
        return web.json_response(body)
