"""What the activator knows about a target: its routing keys, limits and endpoints.

A *target* is one autoscaled model, named ``namespace/name`` after its
Deployment. Two sources describe targets (docs/architecture.md): Kubernetes (opted-in
Deployments and their Services' EndpointSlices, in :mod:`activator.kube`) and
a static routes file (:mod:`activator.routing.routes_file`). Both produce the same
frozen values defined here and hand whole snapshots to a
:class:`TargetSink`; nothing downstream knows which source is in use.

What a source knows of a target comes in two parts that change for
different reasons (:class:`Discovered`): its :class:`TargetSpec`, what its
annotations (or its routes-file entry) say, which changes when an operator
edits them; and its endpoints, which change with every replica that starts,
turns ready or goes away. The spec is an immutable value; the endpoints are
not part of it, so a replica turning ready changes nothing the spec's
readers see.

An :class:`Endpoint` carries the source's opinion of readiness. The activator
may know better in both directions: a direct probe can find a not-yet-ready
endpoint accepting connections before the EndpointSlice says so, and a
refused connection marks a "ready" one down until a probe succeeds again
(:mod:`activator.replicas.readiness`). A *draining* endpoint is the exception: the
source says it is going away, and nothing the activator sees overrides that.

A target may declare LoRA adapters (:class:`Adapter`: a name a request puts
in ``model`` and the source its replicas load it from); requests for one
are routed by :mod:`activator.balancing.adapter_affinity`.

What a routing key may say, its default and its range are the shared rules
of :mod:`groundwork.rules.routing_keys` (the scaler checks the same keys
with them); a :class:`TargetSpec` checks its limits against the same ranges,
whichever source built it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from groundwork.rules.priority import PRIORITY_RANGE
from groundwork.rules.routing_keys import (
    BALANCING_MODES,
    COLD_START_TIMEOUT_RANGE_S,
    CONTAINER_CONCURRENCY_RANGE,
    DEFAULT_BALANCING,
    DEFAULT_COLD_START_TIMEOUT_S,
    DEFAULT_CONTAINER_CONCURRENCY,
    DEFAULT_MAX_BUFFERED,
    DEFAULT_PRIORITY,
    DEFAULT_RESEND_UNANSWERED,
    MAX_BUFFERED_RANGE,
    Adapter,
)
from groundwork.rules.scaling_keys import ADAPTER_KEEP_ALIVE

__all__ = [
    "DEFAULT_ADAPTER_KEEP_ALIVE_S",
    "Adapter",
    "Discovered",
    "Endpoint",
    "TargetSink",
    "TargetSource",
    "TargetSpec",
    "parse_target_name",
]

# autoscaling.tidal.dev/adapter-keep-alive: an adapter idle this long is unloaded.
DEFAULT_ADAPTER_KEEP_ALIVE_S: float = ADAPTER_KEEP_ALIVE.default_value()

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def parse_target_name(value: str, *, key: str = "name") -> str:
    """Check ``namespace/name`` (both DNS labels) and return it unchanged."""
    parts = value.split("/")
    if len(parts) != 2 or not all(_NAME.match(p) and len(p) <= 253 for p in parts):
        raise ValueError(
            f"{key}: {value!r} is not a target name; expected namespace/name "
            "in lowercase letters, digits and '-', such as default/llama"
        )
    return value


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One replica's address, as the source sees it."""

    host: str
    port: int
    # The pod's name when known (Kubernetes), else ``host:port``; reports use it.
    name: str = ""
    # The source's view: EndpointSlice ``ready`` (routes file: always False,
    # readiness then comes only from probes).
    ready: bool = False
    # Going away (EndpointSlice ``terminating``; a spot interruption notice
    # ends there too): requests in flight there finish, nothing new is sent,
    # and no probe puts it back in rotation.
    draining: bool = False

    @property
    def key(self) -> str:
        return f"{self.host}:{self.port}" if ":" not in self.host else f"[{self.host}]:{self.port}"

    @property
    def label(self) -> str:
        return self.name or self.key


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """One target: how requests find it, how many it holds, how it is served."""

    name: str
    hosts: tuple[str, ...] = ()
    path_prefix: str | None = None
    models: tuple[str, ...] = ()
    container_concurrency: int = DEFAULT_CONTAINER_CONCURRENCY
    cold_start_timeout_s: float = DEFAULT_COLD_START_TIMEOUT_S
    max_buffered: int = DEFAULT_MAX_BUFFERED
    balancing: str = DEFAULT_BALANCING
    resend_unanswered: bool = DEFAULT_RESEND_UNANSWERED
    # Estimate each request's prompt tokens and max_tokens for the scaler (a model
    # sized in tokens: one with a TTFT objective); no cost for the others.
    counts_tokens: bool = False
    # LoRA adapters its replicas may load, and how long one stays loaded idle.
    adapters: tuple[Adapter, ...] = ()
    adapter_keep_alive_s: float = DEFAULT_ADAPTER_KEEP_ALIVE_S

    def adapter(self, name: str) -> Adapter | None:
        """The declared adapter a request's ``model`` names, if any."""
        for adapter in self.adapters:
            if adapter.name == name:
                return adapter
        return None

    # Class of a held request that names none; whether a sheddable request
    # (class below 0) that finds no ready replica is refused at once.
    default_priority: int = DEFAULT_PRIORITY
    shed_at_zero: bool = False

    def __post_init__(self) -> None:
        parse_target_name(self.name)
        lo, hi = CONTAINER_CONCURRENCY_RANGE
        if not lo <= self.container_concurrency <= hi:
            raise ValueError(
                f"{self.name}: container_concurrency must be {lo}..{hi} "
                f"(0: no limit), got {self.container_concurrency}"
            )
        lo_s, hi_s = COLD_START_TIMEOUT_RANGE_S
        if not lo_s <= self.cold_start_timeout_s <= hi_s:
            raise ValueError(
                f"{self.name}: cold_start_timeout must be 1s..1h, got {self.cold_start_timeout_s}s"
            )
        lo, hi = MAX_BUFFERED_RANGE
        if not lo <= self.max_buffered <= hi:
            raise ValueError(
                f"{self.name}: max_buffered must be {lo}..{hi}, got {self.max_buffered}"
            )
        lo, hi = PRIORITY_RANGE
        if not lo <= self.default_priority <= hi:
            raise ValueError(
                f"{self.name}: default_priority must be {lo}..{hi}, got {self.default_priority}"
            )
        if self.balancing not in BALANCING_MODES:
            raise ValueError(
                f"{self.name}: balancing must be one of {', '.join(BALANCING_MODES)}, "
                f"got {self.balancing!r}"
            )
        if self.path_prefix is not None and not self.path_prefix.startswith("/"):
            raise ValueError(
                f"{self.name}: path_prefix must start with '/', got {self.path_prefix!r}"
            )

    def routing_keys(
        self,
    ) -> tuple[tuple[str, ...], str | None, tuple[str, ...], tuple[Adapter, ...]]:
        """What routing reads; a change here means the routing table is rebuilt."""
        return (self.hosts, self.path_prefix, self.models, self.adapters)


@dataclass(frozen=True, slots=True)
class Discovered:
    """What a source knows of one target now: its spec and where its replicas are."""

    spec: TargetSpec
    endpoints: tuple[Endpoint, ...] = ()


class TargetSink(Protocol):
    """Receives whole snapshots of every target a source knows, by name."""

    def apply(self, targets: Mapping[str, Discovered]) -> None: ...


class TargetSource(Protocol):
    """Discovers targets and keeps a sink up to date until cancelled."""

    async def run(self, sink: TargetSink) -> None:
        """Push a first snapshot as soon as one is known, then every change."""
        ...
