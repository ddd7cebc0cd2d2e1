"""A DCGM-exporter look-alike: GPU utilization per pod from the fake servers' busy time.

Each fake model server reports how long its simulated GPU has been busy
(``GET /sandbox/gpu``: busy and elapsed model-time seconds). The exporter is
told which servers run on which GPU of which pod (:meth:`DcgmExporter.add`),
polls them every ``interval_s`` and publishes, per GPU, what
dcgm-exporter does:

- ``DCGM_FI_DEV_GPU_UTIL``: percent of the last period the GPU was busy (0-100);
- ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``: the same as a ratio (0-1);
- ``DCGM_FI_DEV_FB_USED``: framebuffer memory used, MiB, as the server
  reports it (vLLM-like servers only; a sleeping one holds little);
- ``DCGM_FI_DEV_FB_FREE``: framebuffer memory free on that physical GPU, MiB:
  its total (as the server reports it) less what every server on the same
  GPU UUID uses, so a time-sliced GPU reads the same for each of its pods;

with labels ``gpu``, ``UUID``, ``pod``, ``namespace``, ``container``.

Main decision: utilization is the busy share of the period between two polls
(in the server's model time, so a sped-up server reads the same as a real-time
one). A server that does not answer is left out of ``/metrics`` until it does
again, as a real exporter shows nothing for a GPU whose pod is gone; its
series never reads as zero by mistake.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from dataclasses import dataclass, field
from types import TracebackType

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = ["DcgmExporter", "GpuTarget"]

LABELS = ("gpu", "UUID", "pod", "namespace", "container")


@dataclass(frozen=True, slots=True)
class GpuTarget:
    """A fake server and where it runs: ``url`` is its base URL (``http://host:port``)."""

    url: str
    pod: str
    namespace: str
    container: str = "model"
    gpu: int = 0
    uuid: str = field(default_factory=lambda: f"GPU-{uuid.uuid4()}")


@dataclass(slots=True)
class _Sample:
    busy_s: float
    model_time_s: float
    fb_used_mib: int | None = None
    fb_total_mib: int | None = None
    # The physical GPU the server says it runs on (a time-sliced one), if any.
    gpu: int | None = None
    uuid: str | None = None


class DcgmExporter:
    """Serves ``/metrics`` on ``host:port`` (0: any free port) while running."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 9400, interval_s: float = 1.0):
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0; got {interval_s!r}")
        self.host = host
        self._port = port
        self.interval_s = interval_s
        self._targets: dict[tuple[str, str, int], GpuTarget] = {}
        self._last: dict[tuple[str, str, int], _Sample] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self._util = Gauge(
            "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", LABELS, registry=self.registry
        )
        self._active = Gauge(
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "Ratio of time the graphics engine is active.",
            LABELS,
            registry=self.registry,
        )
        self._fb_used = Gauge(
            "DCGM_FI_DEV_FB_USED",
            "Framebuffer memory used (in MiB).",
            LABELS,
            registry=self.registry,
        )
        self._fb_free = Gauge(
            "DCGM_FI_DEV_FB_FREE",
            "Framebuffer memory free (in MiB).",
            LABELS,
            registry=self.registry,
        )
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    def add(self, target: GpuTarget) -> None:
        self._targets[(target.namespace, target.pod, target.gpu)] = target

    def remove(self, *, namespace: str, pod: str, gpu: int = 0) -> None:
        key = (namespace, pod, gpu)
        target = self._targets.pop(key, None)
        self._last.pop(key, None)
        if target is not None:
            self._forget(target)

    def _labels(self, t: GpuTarget) -> tuple[str, ...]:
        return (str(t.gpu), t.uuid, t.pod, t.namespace, t.container)

    def _forget(self, t: GpuTarget) -> None:
        for gauge in (self._util, self._active, self._fb_used, self._fb_free):
            with contextlib.suppress(KeyError):
                gauge.remove(*self._labels(t))

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._port)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))
        self._task = asyncio.create_task(self._poll_forever(), name="dcgm-poll")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> DcgmExporter:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _poll_forever(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self.interval_s)

    async def poll_once(self) -> None:
        """Read every target once and update the gauges (the poll loop calls this)."""
        targets = list(self._targets.items())
        results = await asyncio.gather(*(self._read(t) for _, t in targets))
        for (key, target), sample in zip(targets, results, strict=True):
            if key not in self._targets:
                continue  # removed while we were reading
            if sample is None:
                self._last.pop(key, None)
                self._forget(target)
                continue
            if sample.gpu is not None and sample.uuid is not None:
                placed = dataclasses.replace(target, gpu=sample.gpu, uuid=sample.uuid)
                if placed != target:
                    # The server knows its GPU better than the pod list does.
                    self._forget(target)
                    self._targets[key] = target = placed
            if sample.fb_used_mib is not None:
                self._fb_used.labels(*self._labels(target)).set(sample.fb_used_mib)
            previous = self._last.get(key)
            self._last[key] = sample
            if previous is None:
                continue  # the first reading only sets the baseline
            period = sample.model_time_s - previous.model_time_s
            if period <= 0:
                continue  # the server restarted (its clock went back) or no time passed
            util = min(1.0, max(0.0, (sample.busy_s - previous.busy_s) / period))
            labels = self._labels(target)
            self._util.labels(*labels).set(round(util * 100))
            self._active.labels(*labels).set(util)
        self._set_free()

    def _set_free(self) -> None:
        """Free memory per physical GPU, from every server that reported on it."""
        used: dict[str, int] = {}
        total: dict[str, int] = {}
        for key, target in self._targets.items():
            sample = self._last.get(key)
            if sample is None or sample.fb_used_mib is None:
                continue
            used[target.uuid] = used.get(target.uuid, 0) + sample.fb_used_mib
            if sample.fb_total_mib:
                total[target.uuid] = sample.fb_total_mib
        for key, target in self._targets.items():
            sample = self._last.get(key)
            if sample is None or target.uuid not in total:
                continue
            free = max(0, total[target.uuid] - used[target.uuid])
            self._fb_free.labels(*self._labels(target)).set(free)

    async def _read(self, target: GpuTarget) -> _Sample | None:
        assert self._session is not None
        try:
            async with self._session.get(f"{target.url}/sandbox/gpu") as resp:
                if resp.status != 200:
                    return None
                body = await resp.json()
            fb, gpu, gpu_uuid = body.get("fb_used_mib"), body.get("gpu"), body.get("uuid")
            fb_total = body.get("fb_total_mib")
            return _Sample(
                float(body["busy_s"]),
                float(body["model_time_s"]),
                int(fb) if isinstance(fb, int | float) else None,
                int(fb_total) if isinstance(fb_total, int | float) else None,
                gpu if isinstance(gpu, int) else None,
                gpu_uuid if isinstance(gpu_uuid, str) else None,
            )
        except (aiohttp.ClientError, TimeoutError, KeyError, ValueError, TypeError):
            return None
