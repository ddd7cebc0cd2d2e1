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
- **GPU shapes keep what was valid** (docs/shapes.md): a model's
  ``placement.tidal.dev/shapes`` and its overrides are read against the
  cluster's shape table (:class:`ShapeSource`), again whenever the table
  changes; a bad one only warns (``InvalidAnnotation``, naming each key and
  what is allowed, and why a listed shape is missing from the table) and
  the model scales on the shapes declared well.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from scaler.kube.types import STATUS_ANNOTATION, ClusterView, DeploymentInfo, TargetSnapshot
from scaler.policy.annotations import AnnotationProblem, unknown_keys
from scaler.policy.api import ScalingConfig
from scaler.policy.protocol import InvalidTargetConfig, Policy, parse_for_setup
from scaler.policy.routing_check import routing_problems
from scaler.policy.shapes.declarations import (
    SHAPES,
    SHAPES_CONFIGMAP,
    ChosenShape,
    ShapeTable,
    is_shape_key,
    read_shapes,
)
from scaler.policy.shapes.template import SHAPE_LABEL
from scaler.policy.status_doc import StatusDocument, parse_status
from scaler.signals.base import PodEndpoint, TargetPods

__all__ = ["ShapeSource", "TargetBook", "TargetConfig"]


class ShapeSource(Protocol):
    """The cluster's shape table (:class:`~scaler.kube.shape_watch.ShapeWatch`)."""

    def table(self) -> tuple[int, ShapeTable]:
        """The table and its revision (moves on each change)."""
        ...

    @property
    def problems(self) -> tuple[AnnotationProblem, ...]:
        """The table's entries left out, each with its problem."""
        ...


log = logging.getLogger(__name__)


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
    # The GPU shapes it may run on, as declared well (empty: no shapes, its own
    # pod template only), and what was not (an InvalidAnnotation Warning).
    shapes: tuple[ChosenShape, ...] = ()
    shape_problem: str | None = None


class TargetBook:
    """Opted-in Deployments -> :class:`TargetConfig`, synced from a :class:`ClusterView`."""

    def __init__(
        self,
        cluster: ClusterView,
        policy: Policy,
        *,
        gpu_metrics: bool = False,
        shapes: ShapeSource | None = None,
    ) -> None:
        self._cluster = cluster
        self._policy = policy
        self._gpu_metrics = gpu_metrics
        self._shapes = shapes
        self._table_revision = 0
        self._entries: dict[str, TargetConfig] = {}
        self._seen: dict[str, Mapping[str, str]] = {}  # annotations as last synced, by identity

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
        annotations did not change since the last call costs one identity check.

        Readers ask and the book follows, rather than the controller syncing it
        before it decides: the hub reads the configs at every arrival, and a
        target that appeared since the last tick must get its samples before
        its first decision."""
        snapshots = self.snapshots()
        for key in [k for k in self._entries if k not in snapshots]:
            del self._entries[key]
            del self._seen[key]
        if self._shapes is not None:
            revision, _ = self._shapes.table()
            if revision != self._table_revision:
                self._table_revision = revision
                for key, entry in self._entries.items():
                    if SHAPES in entry.annotations:
                        self._entries[key] = self._with_shapes(entry, reread=True)
        for key, snap in snapshots.items():
            d = snap.deployment
            if self._seen.get(key) is not d.annotations:
                self._update(key, d)

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

    def _update(self, key: str, d: DeploymentInfo) -> None:
        self._seen[key] = d.annotations
        seen_status = parse_status(d.annotations.get(STATUS_ANNOTATION))
        annotations = {k: v for k, v in d.annotations.items() if k != STATUS_ANNOTATION}
        entry = self._entries.get(key)
        if entry is not None and entry.annotations == annotations:
            self._entries[key] = replace(entry, seen_status=seen_status)
            return
        config: ScalingConfig | None
        problem: str | None = None
        try:
            config = parse_for_setup(self._policy, annotations, gpu_metrics=self._gpu_metrics)
        except InvalidTargetConfig as exc:
            config, problem = None, str(exc)
            log.warning("%s: invalid annotations, leaving it alone: %s", key, problem)
        routing = "; ".join(str(p) for p in routing_problems(annotations)) or None
        if routing is not None:
            log.warning("%s: routing annotations the activator cannot use: %s", key, routing)
        unknown = (
            "; ".join(str(p) for p in unknown_keys(annotations) if not is_shape_key(p.key)) or None
        )
        if unknown is not None:
            log.warning("%s: %s", key, unknown)
        self._entries[key] = self._with_shapes(
            TargetConfig(
                key=key,
                annotations=annotations,
                config=config,
                problem=problem,
                seen_status=seen_status,
                revision=0 if entry is None else entry.revision + 1,
                routing_problem=routing,
                unknown_keys=unknown,
            )
        )

    def _with_shapes(self, entry: TargetConfig, *, reread: bool = False) -> TargetConfig:
        """``entry`` with its shapes read against the table as it is now; ``reread``:
        again, after the table changed (a new reading reports its problems again: the
        revision moves)."""
        annotations = entry.annotations
        if not any(is_shape_key(k) for k in annotations):
            return replace(entry, shapes=(), shape_problem=None)
        table = self._shapes.table()[1] if self._shapes is not None else ShapeTable({})
        reading = read_shapes(annotations, table)
        problems = list(reading.problems)
        listed = {n.strip() for n in annotations.get(SHAPES, "").split(",")}
        table_problems = self._shapes.problems if self._shapes is not None else ()
        for bad in table_problems:
            if bad.key.split(" ")[0] in listed:
                problems.append(
                    AnnotationProblem(f"{SHAPES_CONFIGMAP} {bad.key}", bad.value, bad.allowed)
                )
        problem = "; ".join(str(p) for p in problems) or None
        if problem is not None:
            log.warning("%s: shapes declared badly, scaling on the rest: %s", entry.key, problem)
        changed = entry.shapes != reading.shapes or entry.shape_problem != problem
        return replace(
            entry,
            shapes=reading.shapes,
            shape_problem=problem,
            revision=entry.revision + 1 if changed and reread else entry.revision,
        )

    def poll_targets(self) -> list[TargetPods]:
        """Ready pods of every target, for the scrape and Prometheus loops (engine
        ``generic`` and port 8000 for a target whose config is invalid)."""
        entries = self.entries()
        out = []
        for key, snap in self.snapshots().items():
            entry = entries.get(key)
            config = entry.config if entry is not None else None
            engine = config.engine if config is not None else "generic"
            port: int | str = config.metrics_port if config is not None else 8000
            shaped = entry is not None and bool(entry.shapes)
            pods = []
            for pod in snap.ready_pods:
                number = pod.port(port)
                if number is not None and pod.ip is not None:
                    # A model with shapes: each pod in its shape's group ("": the
                    # user's own template's), so each shape is measured on its own.
                    group = pod.labels.get(SHAPE_LABEL, "") if shaped else None
                    pods.append(
                        PodEndpoint(name=pod.name, ip=pod.ip, metrics_port=number, group=group)
                    )
            d = snap.deployment
            out.append(TargetPods(key=key, namespace=d.namespace, engine=engine, pods=pods))
        return out
