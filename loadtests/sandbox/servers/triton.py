"""A Triton-like KServe v2 server on the dynamic-batching model.

Endpoints: ``GET /v2/health/live``, ``GET /v2/health/ready`` (400 until the
model is loaded, as Triton answers), ``GET /v2``, ``GET /v2/models/{m}``
(metadata), ``GET /v2/models/{m}/ready``, ``POST /v2/models/{m}/infer`` and
``POST /v2/models/{m}/versions/{v}/infer`` (JSON tensors), ``GET /metrics``,
and ``GET /sandbox/gpu`` (busy time for the DCGM-like exporter; not Triton's).

The model is an identity: each output is its input, renamed ``OUTPUT<i>``.
The batch size of a request is the first dimension of its first input.

Metrics are Triton's, labels ``model`` and ``version``:
``nv_inference_request_success``, ``nv_inference_request_failure``,
``nv_inference_count`` (inferences, i.e. batch items),
``nv_inference_exec_count`` (model executions), ``nv_inference_queue_duration_us``,
``nv_inference_compute_infer_duration_us`` (cumulative microseconds),
``nv_inference_pending_request_count``, and ``nv_gpu_utilization`` (0..1,
label ``gpu_uuid`` as in Triton). Main decision: Triton's counters carry no
``_total`` suffix and prometheus_client's text writer would add one, so the
registry is rendered by :func:`render_exposition`, which writes names as given.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from loadtests.sandbox.servers.engine_app import RuntimeApp, ServerConfig
from loadtests.sandbox.servers.engine_runtime import BatchRuntime
from loadtests.sandbox.servers.faults import FaultInjector
from simulator.engine import UtilizationMeter

__all__ = ["TritonApp", "render_exposition"]

VERSION = "1"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
DATATYPES = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "FP32", "FP64", "BYTES", "BF16"}  # fmt: skip


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def render_exposition(registry: CollectorRegistry) -> bytes:
    """Prometheus text format with sample names exactly as the collectors give them."""
    lines: list[str] = []
    for metric in registry.collect():
        lines.append(f"# HELP {metric.name} {_escape(metric.documentation)}")
        lines.append(f"# TYPE {metric.name} {metric.type}")
        for sample in metric.samples:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sample.labels.items())
            lines.append(f"{sample.name}{{{labels}}} {float(sample.value)!r}")
    return ("\n".join(lines) + "\n").encode()


class TritonStats:
    """Counters of one model, exported by :class:`TritonCollector`."""

    def __init__(self) -> None:
        self.success = 0
        self.failure = 0
        self.inference_count = 0
        self.exec_count = 0
        self.queue_us = 0.0
        self.compute_us = 0.0


class TritonCollector(Collector):
    def __init__(self, app: TritonApp) -> None:
        self._app = app

    def collect(self) -> Iterable[Metric]:
        app = self._app
        stats = app.stats
        labels = {"model": app.config.model, "version": VERSION}
        counters = (
            ("nv_inference_request_success", "Number of successful inference requests, "
             "all batch sizes", stats.success),
            ("nv_inference_request_failure", "Number of failed inference requests, "
             "all batch sizes", stats.failure),
            ("nv_inference_count", "Number of inferences performed (does not include "
             "cached requests)", stats.inference_count),
            ("nv_inference_exec_count", "Number of model executions performed (does not "
             "include cached requests)", stats.exec_count),
            ("nv_inference_queue_duration_us", "Cumulative inference queuing duration in "
             "microseconds (includes cached requests)", stats.queue_us),
            ("nv_inference_compute_infer_duration_us", "Cumulative compute inference "
             "duration in microseconds (does not include cached requests)", stats.compute_us),
        )  # fmt: skip
        for name, doc, value in counters:
            metric = Metric(name, doc, "counter")
            metric.add_sample(name, labels, float(value))
            yield metric
        pending = GaugeMetricFamily(
            "nv_inference_pending_request_count",
            "Instantaneous number of pending requests awaiting execution per-model.",
            labels=["model", "version"],
        )
        pending.add_metric([app.config.model, VERSION], app.runtime.pending)
        yield pending
        util = GaugeMetricFamily(
            "nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", labels=["gpu_uuid"]
        )
        util.add_metric([app.gpu_uuid], app.gpu_utilization())
        yield util


def _error(message: str, status: int = 400) -> web.Response:
    return web.json_response({"error": message}, status=status)


class TritonApp(RuntimeApp[BatchRuntime]):
    listen_before_ready = True

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.stats = TritonStats()
        runtime = BatchRuntime(config.batcher, speedup=config.speedup, on_batch=self._count_exec)
        self.faults = FaultInjector(config.faults)
        self.gpu_uuid = f"GPU-{uuid.uuid4()}"
        self._meter = UtilizationMeter()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(TritonCollector(self))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        r = app.router
        r.add_get("/v2/health/live", self.live)
        r.add_get("/v2/health/ready", self.ready)
        r.add_get("/v2", self.server_metadata)
        r.add_get("/v2/models/{model}", self.model_metadata)
        r.add_get("/v2/models/{model}/versions/{version}", self.model_metadata)
        r.add_get("/v2/models/{model}/ready", self.model_ready)
        r.add_get("/v2/models/{model}/versions/{version}/ready", self.model_ready)
        r.add_post("/v2/models/{model}/infer", self.infer)
        r.add_post("/v2/models/{model}/versions/{version}/infer", self.infer)
        r.add_get("/metrics", self.metrics)
        r.add_get("/sandbox/gpu", self.gpu)
        super().__init__(app=app, runtime=runtime)

    def gpu_utilization(self) -> float:
        return self._meter.read(now=self.model_time_s(), busy_s=self.busy_time_s())

    def _count_exec(self, items: int) -> None:
        self.stats.exec_count += 1

    # --- handlers -------------------------------------------------------------------

    async def live(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def ready(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self._ready else 400)

    async def server_metadata(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"name": "triton", "version": "2.50.0", "extensions": ["classification", "statistics"]}
        )

    def _check_model(self, request: web.Request) -> web.Response | None:
        model = request.match_info["model"]
        version = request.match_info.get("version", VERSION)
        if model != self.config.model or version != VERSION:
            return _error(f"Request for unknown model: '{model}' version {version} is not found")
        if not self._ready:
            return _error(f"Request for unknown model: '{model}' has no available versions")
        return None

    async def model_metadata(self, request: web.Request) -> web.Response:
        problem = self._check_model(request)
        if problem is not None:
            return problem
        tensor = {"datatype": "FP32", "shape": [-1, -1]}
        return web.json_response(
            {
                "name": self.config.model,
                "versions": [VERSION],
                "platform": "tidal_sandbox",
                "inputs": [{"name": "INPUT0", **tensor}],
                "outputs": [{"name": "OUTPUT0", **tensor}],
            }
        )

    async def model_ready(self, request: web.Request) -> web.Response:
        problem = self._check_model(request)
        return web.Response(status=400 if problem is not None else 200)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=render_exposition(self.registry), headers={"Content-Type": PROMETHEUS_TEXT}
        )

    async def infer(self, request: web.Request) -> web.Response:
        problem = self._check_model(request)
        if problem is not None:
            return problem
        try:
            body = await request.json()
            inputs, batch = self._parse(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self.stats.failure += 1
            return _error("failed to parse the request JSON buffer")
        except ValueError as e:
            self.stats.failure += 1
            return _error(str(e))
        if batch > self.config.batcher.max_batch_size:
            self.stats.failure += 1
            return _error(
                f"inference request batch-size must be <= {self.config.batcher.max_batch_size} "
                f"for '{self.config.model}'"
            )
        if self.faults.should_fail():
            self.stats.failure += 1
            return _error("fault injection: this request fails on purpose",
                          self.config.faults.fail_status)  # fmt: skip
        queue_s, compute_s = await self.runtime.infer(batch)
        stats = self.stats
        stats.success += 1
        stats.inference_count += batch
        stats.queue_us += queue_s * 1e6
        stats.compute_us += compute_s * 1e6
        outputs = [
            {
                "name": f"OUTPUT{i}",
                "datatype": tensor["datatype"],
                "shape": tensor["shape"],
                "data": tensor["data"],
            }
            for i, tensor in enumerate(inputs)
        ]
        reply: dict[str, Any] = {
            "model_name": self.config.model,
            "model_version": VERSION,
            "outputs": outputs,
        }
        if isinstance(body.get("id"), str):
            reply["id"] = body["id"]
        return web.json_response(reply)

    @staticmethod
    def _parse(body: Any) -> tuple[list[dict[str, Any]], int]:
        if not isinstance(body, dict):
            raise ValueError("the request must be a JSON object with 'inputs'")
        inputs = body.get("inputs")
        if not isinstance(inputs, list) or not inputs:
            raise ValueError("'inputs' must be a non-empty list of tensors")
        for i, tensor in enumerate(inputs):
            if not isinstance(tensor, dict):
                raise ValueError(f"inputs[{i}] must be an object")
            for key in ("name", "shape", "datatype", "data"):
                if key not in tensor:
                    raise ValueError(f"inputs[{i}] is missing '{key}'")
            shape = tensor["shape"]
            if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
                raise ValueError(f"inputs[{i}].shape must be a list of sizes >= 0")
            if tensor["datatype"] not in DATATYPES:
                raise ValueError(
                    f"inputs[{i}].datatype {tensor['datatype']!r} is not one of {sorted(DATATYPES)}"
                )
        shape = inputs[0]["shape"]
        batch = shape[0] if len(shape) >= 2 else 1
        if batch < 1:
            raise ValueError("the batch dimension (first of inputs[0].shape) must be >= 1")
        return inputs, batch
