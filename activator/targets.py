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
:func:`parse_adapters` reads the annotation's ``name=source`` list and
:func:`adapters_from_mapping` a ConfigMap's data, with the same rules.

Durations are Go-style strings in annotations and routes files (``90s``,
``5m``, ``1h30m``, ``250ms``); :func:`parse_duration_s` turns them into
seconds and says what is allowed when it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "ADAPTER_KEEP_ALIVE_RANGE_S",
    "BALANCING_MODES",
    "DEFAULT_ADAPTER_KEEP_ALIVE_S",
    "DEFAULT_BALANCING",
    "DEFAULT_COLD_START_TIMEOUT_S",
    "DEFAULT_CONTAINER_CONCURRENCY",
    "DEFAULT_MAX_BUFFERED",
    "DEFAULT_PRIORITY",
    "DEFAULT_RESEND_UNANSWERED",
    "Adapter",
    "Discovered",
    "Endpoint",
    "TargetSink",
    "TargetSource",
    "TargetSpec",
    "adapters_from_mapping",
    "parse_adapters",
    "parse_duration_s",
    "parse_target_name",
]

# Defaults of the routing.tidal.dev/* annotations (docs/annotations.md).
DEFAULT_COLD_START_TIMEOUT_S = 600.0
DEFAULT_MAX_BUFFERED = 1000
DEFAULT_CONTAINER_CONCURRENCY = 0
# How a request picks among ready replicas: least in flight, or where its
# prompt's prefix is most likely cached (activator.balancing.prefix_affinity).
BALANCING_MODES = ("least-loaded", "prefix")
DEFAULT_BALANCING = "least-loaded"
# A request whose replica closed the connection before a byte of answer is
# sent once more (activator.statuses says why that suits inference).
DEFAULT_RESEND_UNANSWERED = True
# The class of a held request that names none (groundwork.priority: standard),
# and the range a class may take.
DEFAULT_PRIORITY = 0
PRIORITY_RANGE = (-1_000_000, 1_000_000)

# Allowed ranges (docs/annotations.md); the routes file and the annotations share them.
COLD_START_TIMEOUT_RANGE_S = (1.0, 3600.0)
MAX_BUFFERED_RANGE = (0, 100_000)
CONTAINER_CONCURRENCY_RANGE = (0, 10_000)

# autoscaling.tidal.dev/adapter-keep-alive: an adapter idle this long is unloaded.
DEFAULT_ADAPTER_KEEP_ALIVE_S = 600.0
ADAPTER_KEEP_ALIVE_RANGE_S = (1.0, 24 * 3600.0)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def parse_duration_s(value: str | float | int, *, key: str) -> float:
    """``"90s"`` -> 90.0; ``"1h30m"`` -> 5400.0. Plain numbers are seconds.

    ``key`` names the setting in the error, so a user sees what to fix.
    """
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected a duration such as 90s, 5m or 1h, got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"{key}: a duration cannot be negative, got {value!r}")
        return float(value)
    text = value.strip()
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if not text or pos != len(text):
        raise ValueError(
            f"{key}: {value!r} is not a duration; use Go-style units ms, s, m, h "
            "such as 250ms, 90s, 5m or 1h30m"
        )
    return total


def parse_target_name(value: str, *, key: str = "name") -> str:
    """Check ``namespace/name`` (both DNS labels) and return it unchanged."""
    parts = value.split("/")
    if len(parts) != 2 or not all(_NAME.match(p) and len(p) <= 253 for p in parts):
        raise ValueError(
            f"{key}: {value!r} is not a target name; expected namespace/name "
            "in lowercase letters, digits and '-', such as default/llama"
        )
    return value


# An adapter name as vLLM takes it in ``model`` and a ConfigMap takes it as a key.
ADAPTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_ADAPTER_SOURCE = re.compile(r"[^\s,=]+")


@dataclass(frozen=True, slots=True)
class Adapter:
    """One declared LoRA adapter: the ``model`` name and where vLLM loads it from."""

    name: str
    source: str


def adapters_from_mapping(
    pairs: Mapping[str, str], *, base_models: tuple[str, ...] = (), where: str = "adapters"
) -> tuple[Adapter, ...]:
    """Name -> source pairs as adapters, in name order; ValueError naming the first bad one."""
    adapters = []
    for name, source in sorted(pairs.items()):
        name, source = name.strip(), source.strip()
        if not ADAPTER_NAME.fullmatch(name):
            raise ValueError(
                f"{where}: adapter name {name!r} is not allowed; use letters, digits, "
                "'.', '_' and '-', starting with a letter or digit"
            )
        if not _ADAPTER_SOURCE.fullmatch(source):
            raise ValueError(
                f"{where}: adapter {name!r} needs a source (a path or a Hugging Face id, "
                f"without spaces, ',' or '='); got {source!r}"
            )
        if name in base_models:
            raise ValueError(f"{where}: adapter {name!r} has the name of the base model")
        adapters.append(Adapter(name, source))
    return tuple(adapters)


def parse_adapters(text: str, *, base_models: tuple[str, ...] = ()) -> tuple[Adapter, ...]:
    """``"sql=/models/sql-lora, chat=org/chat-lora"`` -> adapters; ValueError when bad."""
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, source = item.partition("=")
        if not sep:
            raise ValueError(
                f"adapters: {item!r} is not name=source, such as sql-lora=/models/sql-lora"
            )
        if name.strip() in pairs:
            raise ValueError(f"adapters: {name.strip()!r} is declared twice")
        pairs[name.strip()] = source
    if not pairs:
        raise ValueError("adapters: the list is empty; expected name=source, ...")
    return adapters_from_mapping(pairs, base_models=base_models)


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
