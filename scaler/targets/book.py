"""Which Deployments the scaler manages, and with what config (docs/annotations.md).

:class:`TargetBook` follows the cluster view's opted-in Deployments and keeps,
per target, its validated :class:`~scaler.policy.api.ScalingConfig` (or the
problem that makes it unusable) and the status annotation it carries. Every
reader goes through :meth:`TargetBook.entries`, which follows the cluster
view; the controller reads it before deciding; the signal hub reads the configs (which
targets get windows) and the pulled sources read the pods to query
(:meth:`TargetBook.poll_targets`), so neither has to ask the controller.

Main decisions:

- **Parse only on change.** The cluster view keeps one ``DeploymentInfo`` per
  version it saw, so an unchanged Deployment is recognised by the identity of
  its annotations, without copying them or parsing the status JSON again; and
  the status annotation (ours) changing never re-parses the config.
- **A bad annotation value rejects the whole config**: the target is kept
  with its problem (the controller reports it and leaves the scale alone)
  until the annotations change; a WARNING is logged once per change. An
  unknown key of ours, or a bad routing annotation, only warns.
- **An InferencePool target** (a Deployment an opted-in pool scales,
  :mod:`scaler.kube.pool_index`) is read from the pool's annotations and
  the Deployment's, the Deployment's winning key by key
  (:mod:`scaler.policy.pool_annotations`), plus the pool's endpoint-picker
  keys; a problem whose value is the pool's is also kept on
  :class:`PoolTarget`, for the Warning raised on the pool.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from groundwork.rules.scaling_keys import METRICS_PORT
from scaler.kube.types import (
    STATUS_ANNOTATION,
    ClusterView,
    DeploymentInfo,
    PoolInfo,
    PoolState,
    TargetSnapshot,
)
from scaler.policy.annotations import AnnotationProblem, unknown_keys
from scaler.policy.api import ScalingConfig
from scaler.policy.pool_annotations import PickerConfig, merge, read_picker
from scaler.policy.protocol import InvalidTargetConfig, Policy, parse_for_setup
from scaler.policy.routing_check import routing_problems
from scaler.policy.status_doc import StatusDocument, parse_status
from scaler.signals.base import PickerEndpoint, PodEndpoint, TargetPods

__all__ = ["PoolTarget", "TargetBook", "TargetConfig"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PoolTarget:
    """The InferencePool that makes a Deployment a target, as its config reads it.

    ``problem`` and ``unknown_keys``: the invalid and unknown keys whose value
    is the pool's (the pool gets their Warnings; the Deployment's own are in
    :class:`TargetConfig`). ``info`` is the pool as last seen, for Events; it
    is not compared, so a pool whose status alone changed changes no config.
    """

    key: str
    picker: PickerConfig
    target_ports: tuple[int, ...] = ()
    problem: str | None = None
    unknown_keys: str | None = None
    info: PoolInfo | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TargetConfig:
    """One target as last synced.

    ``revision`` grows whenever its annotations (the status aside) change, so a
    reader sees a new config without comparing annotations.
    """

    key: str
    annotations: Mapping[str, str]  # without the status annotation
    config: ScalingConfig | None
    problem: str | None
    seen_status: StatusDocument | None  # the status annotation on the Deployment
    revision: int = 0
    # Bad routing.tidal.dev/* annotations: the activator routes with their defaults,
    # so scaling goes on; the controller raises an InvalidRouting Warning.
    routing_problem: str | None = None
    # Unknown autoscaling/placement keys: ignored, so scaling goes on; the controller
    # raises an UnknownAnnotation Warning naming the closest known key.
    unknown_keys: str | None = None
    # The InferencePool that scales this Deployment (None: opted in by its own label).
    pool: PoolTarget | None = None


class TargetBook:
    """Opted-in Deployments -> :class:`TargetConfig`, synced from a :class:`ClusterView`."""

    def __init__(self, cluster: ClusterView, policy: Policy, *, gpu_metrics: bool = False) -> None:
        self._cluster = cluster
        self._policy = policy
        self._gpu_metrics = gpu_metrics
        self._entries: dict[str, TargetConfig] = {}
        # Bumped at every change of the entries: the pods to poll are built once per
        # change of them or of the snapshots, not at every poll (a picker is polled
        # every 250 ms, and 1,000 targets take about 9 ms to list).
        self._version = 0
        self._polled: tuple[object, int, list[TargetPods]] | None = None
        # Per target, its annotations and pool as last synced, compared by identity.
        self._seen: dict[str, tuple[Mapping[str, str], PoolInfo | None]] = {}

    @property
    def synced(self) -> bool:
        return self._cluster.synced

    def snapshots(self) -> Mapping[str, TargetSnapshot]:
        """The cluster view's targets (``{}`` before it has synced)."""
        return self._cluster.targets() if self._cluster.synced else {}

    def entries(self) -> Mapping[str, TargetConfig]:
        """Every target the cluster view holds now, its config up to date."""
        self._follow()
        return self._entries

    def _follow(self) -> None:
        """Follow the cluster view; the one place the book changes. A target whose
        annotations (and pool) did not change since the last call costs two
        identity checks.

        Readers ask and the book follows, rather than the controller syncing it
        before it decides: the hub reads the configs at every arrival, and a
        target that appeared since the last tick must get its samples before
        its first decision."""
        snapshots = self.snapshots()
        pools = _pools_by_target(self._cluster.pools()) if snapshots else {}
        for key in [k for k in self._entries if k not in snapshots]:
            del self._entries[key]
            self._version += 1
            del self._seen[key]
        for key, snap in snapshots.items():
            d, pool = snap.deployment, pools.get(key)
            seen = self._seen.get(key)
            if seen is None or seen[0] is not d.annotations or seen[1] is not pool:
                self._update(key, d, pool)

    def pools(self) -> Mapping[str, PoolState]:
        """The opted-in InferencePools and what each selects (``{}`` before the sync)."""
        return self._cluster.pools() if self._cluster.synced else {}

    def configs(self) -> Mapping[str, ScalingConfig | None]:
        """Target -> its config, ``None`` while its annotations are invalid."""
        return {key: entry.config for key, entry in self.entries().items()}

    def get(self, key: str) -> TargetConfig | None:
        return self._entries.get(key)

    def wanted(self, key: str) -> int | None:
        """The replicas the status annotation says Tidal wants (``None``: not known yet)."""
        entry = self._entries.get(key)
        desired = (entry.seen_status or {}).get("desired") if entry is not None else None
        return desired if isinstance(desired, int) and not isinstance(desired, bool) else None

    def _update(self, key: str, d: DeploymentInfo, pool: PoolInfo | None) -> None:
        self._seen[key] = (d.annotations, pool)
        seen_status = parse_status(d.annotations.get(STATUS_ANNOTATION))
        own = {k: v for k, v in d.annotations.items() if k != STATUS_ANNOTATION}
        entry = self._entries.get(key)
        if pool is None:
            annotations, from_pool = own, frozenset[str]()
        else:
            merged = merge(pool.annotations, own)
            annotations, from_pool = dict(merged.annotations), merged.from_pool
        if entry is not None and entry.annotations == annotations and _same(entry.pool, pool):
            # Nothing read changed (only the status annotation, or the pool's status).
            fresh = replace(entry.pool, info=pool) if entry.pool is not None else None
            self._entries[key] = replace(entry, seen_status=seen_status, pool=fresh)
            self._version += 1
            return
        read = _Reading(annotations, from_pool, pool)
        try:
            read.config = parse_for_setup(self._policy, annotations, gpu_metrics=self._gpu_metrics)
        except InvalidTargetConfig as exc:
            read.bad(exc.problems or (str(exc),))
        pool_target = read.pool_target()
        if read.problems:
            log.warning("%s: invalid annotations, leaving it alone: %s", key, read.problem)
        routing = "; ".join(str(p) for p in routing_problems(own)) or None
        if routing is not None:
            log.warning("%s: routing annotations the activator cannot use: %s", key, routing)
        unknown = read.unknown(on_pool=False)
        if unknown is not None:
            log.warning("%s: %s", key, unknown)
        self._version += 1
        self._entries[key] = TargetConfig(
            key=key,
            annotations=annotations,
            config=read.config if not read.problems else None,
            problem=read.problem,
            seen_status=seen_status,
            revision=0 if entry is None else entry.revision + 1,
            routing_problem=routing,
            unknown_keys=unknown,
            pool=pool_target,
        )

    def poll_targets(self) -> list[TargetPods]:
        """Ready pods of every target, for the polled sources (engine ``generic`` and
        port 8000 for a target whose config is invalid); the same list while neither the
        targets nor their configs changed (callers do not change it)."""
        entries, snapshots = self.entries(), self.snapshots()
        cached = self._polled
        if cached is not None and cached[0] is snapshots and cached[1] == self._version:
            return cached[2]
        out = []
        for key, snap in snapshots.items():
            entry = entries.get(key)
            config = entry.config if entry is not None else None
            engine = config.engine if config is not None else "generic"
            port = _metrics_port(entry)
            pods = []
            for pod in snap.ready_pods:
                number = pod.port(port)
                if number is not None and pod.ip is not None:
                    pods.append(PodEndpoint(name=pod.name, ip=pod.ip, metrics_port=number))
            d = snap.deployment
            out.append(
                TargetPods(
                    key=key,
                    namespace=d.namespace,
                    engine=engine,
                    pods=pods,
                    picker=_picker(entry),
                )
            )
        self._polled = (snapshots, self._version, out)
        return out


def _pools_by_target(states: Mapping[str, PoolState]) -> dict[str, PoolInfo]:
    """Deployment key -> the pool that makes it a target."""
    return {s.bound_to: s.pool for s in states.values() if s.bound_to is not None}


def _same(target: PoolTarget | None, pool: PoolInfo | None) -> bool:
    """Whether ``pool`` reads as ``target`` was read (its annotations aside)."""
    if target is None or pool is None or target.info is None:
        return target is None and pool is None
    return (target.key, target.target_ports, target.info.picker) == (
        pool.key,
        pool.target_ports,
        pool.picker,
    )


def _metrics_port(entry: TargetConfig | None) -> int | str:
    """The port of a target's pods' ``/metrics``: the annotation's (default 8000); behind a
    pool that does not set it, the pool's first target port, where vLLM serves them."""
    if entry is None or entry.config is None:
        return 8000
    pool = entry.pool
    if pool is not None and pool.target_ports and METRICS_PORT.name not in entry.annotations:
        return pool.target_ports[0]
    return entry.config.metrics_port


def _picker(entry: TargetConfig | None) -> PickerEndpoint | None:
    pool = entry.pool if entry is not None else None
    if pool is None or pool.picker.metrics_url is None or pool.info is None:
        return None
    return PickerEndpoint(pool=pool.info.name, metrics_url=pool.picker.metrics_url)


class _Reading:
    """One reading of a target's annotations: its config, its problems and where each
    bad value came from (the Deployment, or the pool that lends it)."""

    def __init__(
        self, annotations: Mapping[str, str], from_pool: frozenset[str], pool: PoolInfo | None
    ) -> None:
        self.annotations = annotations
        self.from_pool = from_pool
        self.pool = pool
        self.config: ScalingConfig | None = None
        self.problems: list[tuple[str | None, str]] = []  # (key, its text)
        self.picker: PickerConfig | None = None
        if pool is not None:
            self.picker, problems = read_picker(
                annotations, namespace=pool.namespace, picker=pool.picker
            )
            self.bad(problems)

    def bad(self, problems: tuple[AnnotationProblem | str, ...]) -> None:
        for p in problems:
            self.problems.append((None, p) if isinstance(p, str) else (p.key, str(p)))

    def _said(self, key: str | None, text: str) -> str:
        if self.pool is not None and key in self.from_pool:
            return f"{text} (on InferencePool {self.pool.key})"
        return text

    @property
    def problem(self) -> str | None:
        """Every problem, each naming the pool when the value is the pool's."""
        return "; ".join(self._said(k, t) for k, t in self.problems) or None

    def unknown(self, *, on_pool: bool) -> str | None:
        """The unknown keys of ours on the pool (``on_pool``), else on the Deployment."""
        found = [
            str(p) for p in unknown_keys(self.annotations) if (p.key in self.from_pool) == on_pool
        ]
        return "; ".join(found) or None

    def pool_target(self) -> PoolTarget | None:
        if self.pool is None or self.picker is None:
            return None
        on_pool = [t for k, t in self.problems if k in self.from_pool]
        return PoolTarget(
            key=self.pool.key,
            picker=self.picker,
            target_ports=self.pool.target_ports,
            problem="; ".join(on_pool) or None,
            unknown_keys=self.unknown(on_pool=True),
            info=self.pool,
        )
