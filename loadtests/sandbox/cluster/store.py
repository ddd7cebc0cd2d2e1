"""The emulated cluster's object store: etcd plus the API server's storage rules.

Everything the API server serves and the emulated controllers act on lives
here, in memory, as plain JSON-shaped dicts. The store gives them the
semantics real clients and controllers rely on:

- one global, increasing ``resourceVersion``; every write gets the next one;
- ``create`` fills ``uid``, ``creationTimestamp``, ``generation``,
  ``generateName`` names, and refuses duplicates (409 AlreadyExists);
- ``update`` with a ``resourceVersion`` that is not the stored one is a 409
  Conflict (optimistic concurrency); without one it is unconditional;
- for types with a ``status`` subresource, writes to the main resource keep the
  stored status and writes to ``status`` change nothing else; ``generation``
  moves only when ``spec`` changes;
- ``delete`` is graceful where the real server is graceful: a scheduled pod
  with a grace period, or any object with finalizers, gets a
  ``deletionTimestamp`` and stays until the kubelet (or whoever holds the
  finalizer) finishes; removing an object garbage-collects its dependents by
  ``ownerReferences`` (Background and Foreground cascade, or Orphan);
  removing a namespace removes what is in it;
- ``watch`` from a ``resourceVersion`` replays the history after it, or
  raises 410 Gone when that version has been compacted away; with no version
  (or ``"0"``) it starts with a synthetic ADDED for every current object.

The store is the rules; three parts it alone drives keep the rest: the
objects and their indexes (:mod:`~loadtests.sandbox.cluster.object_table`),
the revisions, the history and the watches it feeds
(:mod:`~loadtests.sandbox.cluster.watch_history`), and what happens to an
object's dependents when it goes
(:mod:`~loadtests.sandbox.cluster.garbage_collector`).

Objects handed out by ``get``/``list``/writes are the caller's copies. Watch
events share one object between all watchers: never mutate an event object.

Everything runs on one event loop and no method awaits, so each write is
atomic with respect to every reader.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Protocol

from loadtests.sandbox.cluster.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
)
from loadtests.sandbox.cluster.garbage_collector import GarbageCollector
from loadtests.sandbox.cluster.object_table import Ident, ObjectTable
from loadtests.sandbox.cluster.resources import RESOURCES, ResourceType
from loadtests.sandbox.cluster.selectors import FieldSelector, LabelSelector
from loadtests.sandbox.cluster.watch_history import Watcher, WatchHistory, WriteRecord

__all__ = ["ObjectReader", "Store", "copy_object", "parse_rfc3339", "rfc3339"]

Obj = dict[str, Any]


def copy_object(value: Any) -> Any:
    """Deep copy of JSON-shaped data; several times faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: copy_object(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_object(v) for v in value]
    return value


def _copy(obj: Obj) -> Obj:
    copied: Obj = copy_object(obj)
    return copied


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(stamp: Any) -> datetime | None:
    """A timestamp as ``rfc3339`` writes it; ``None`` when absent or unreadable."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _same_except_rv(a: Obj, b: Obj) -> bool:
    ma = {k: v for k, v in a["metadata"].items() if k != "resourceVersion"}
    mb = {k: v for k, v in b["metadata"].items() if k != "resourceVersion"}
    return ma == mb and {k: v for k, v in a.items() if k != "metadata"} == {
        k: v for k, v in b.items() if k != "metadata"
    }


def _pod_grace(pod: Obj, requested: int | None) -> int:
    if requested is not None:
        return max(0, requested)
    return int(pod.get("spec", {}).get("terminationGracePeriodSeconds", 30))


class ObjectReader(Protocol):
    """The store's reads: what code that only looks needs of it."""

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj: ...

    def peek(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj | None: ...

    def list(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        copy: bool = True,
    ) -> tuple[builtins.list[Obj], str]: ...


class Store:
    """The API server's storage: every read and write, under the rules above."""

    def __init__(
        self,
        *,
        resources: Iterable[ResourceType] = RESOURCES,
        history_size: int = 20_000,
        max_pending_per_watcher: int = 50_000,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._table = ObjectTable(resources)
        self._history = WatchHistory(
            self._table, size=history_size, max_pending=max_pending_per_watcher
        )
        self._collector = GarbageCollector(self._table, self)
        self._clock = clock
        # Called after every committed write, for in-process controllers that
        # want to react without a watch (cheap and synchronous; must not raise).
        self._listeners: list[Callable[[ResourceType, str, Obj | None, Obj], None]] = []

    # --- bookkeeping -----------------------------------------------------------

    @property
    def resource_version(self) -> str:
        return str(self._history.revision)

    def now(self) -> datetime:
        return self._clock()

    def resource_type(self, key: str) -> ResourceType:
        return self._table.resource_type(key)

    def add_listener(self, listener: Callable[[ResourceType, str, Obj | None, Obj], None]) -> None:
        self._listeners.append(listener)

    def _commit(self, rtype: ResourceType, event_type: str, old: Obj | None, new: Obj) -> None:
        self._history.record(WriteRecord(self._history.revision, rtype, event_type, old, new))
        for listener in self._listeners:
            listener(rtype, event_type, old, new)

    # --- reads -------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self._table.find(rtype, self._table.ident(rtype, namespace, name))
        if obj is None:
            raise NotFound.of(rtype.group, rtype.plural, name)
        return _copy(obj)

    def peek(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The stored object itself, not a copy, or None: read it, never mutate it."""
        return self._table.find(rtype, self._table.ident(rtype, namespace, name))

    def list(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        copy: bool = True,
    ) -> tuple[list[Obj], str]:
        """Matching objects sorted by namespace and name, and the list's resourceVersion."""
        matched = self._table.select(rtype, namespace=namespace, labels=labels, fields=fields)
        items = [_copy(obj) if copy else obj for obj in matched]
        return items, self.resource_version

    # --- writes ------------------------------------------------------------------

    def create(self, rtype: ResourceType, obj: Obj, *, namespace: str | None = None) -> Obj:
        obj = _copy(obj)
        meta = obj.setdefault("metadata", {})
        if rtype.namespaced:
            ns = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") not in (None, "", ns):
                raise BadRequest(
                    "the namespace of the provided object does not match the namespace "
                    "sent on the request"
                )
            meta["namespace"] = ns
            if rtype.key != "namespaces" and ns not in self._table.namespaces():
                raise NotFound.of("", "namespaces", ns)
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise Invalid.of(
                    kind=rtype.kind,
                    group=rtype.group,
                    name="",
                    causes=[("metadata.name", "Required value: name or generateName is required")],
                )
            meta["name"] = prefix + uuid.uuid4().hex[:5]
        ident = self._table.ident(rtype, meta.get("namespace"), meta["name"])
        if self._table.find(rtype, ident) is not None:
            raise AlreadyExists.of(rtype.group, rtype.plural, meta["name"])
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self._clock())
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        if "spec" in obj or rtype.has_status:
            meta["generation"] = 1
        meta["resourceVersion"] = str(self._history.next_revision())
        self._table.put(rtype, ident, obj)
        self._commit(rtype, "ADDED", None, obj)
        return _copy(obj)

    def update(
        self,
        rtype: ResourceType,
        obj: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        """Replace an object (PUT semantics). ``subresource="status"`` writes only status."""
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise BadRequest("name is required for an update")
        ns = namespace if namespace is not None else meta.get("namespace")
        ident = self._table.ident(rtype, ns, name)
        stored = self._table.find(rtype, ident)
        if stored is None:
            raise NotFound.of(rtype.group, rtype.plural, name)
        rv = meta.get("resourceVersion")
        if rv and rv != stored["metadata"]["resourceVersion"]:
            raise Conflict.stale(rtype.group, rtype.plural, name)
        if meta.get("uid") and meta["uid"] != stored["metadata"]["uid"]:
            raise Conflict(
                f"Precondition failed: UID in precondition: {meta['uid']}, "
                f"UID in object meta: {stored['metadata']['uid']}"
            )
        new = _copy(obj)
        new_meta = new.setdefault("metadata", {})
        old_meta = stored["metadata"]
        # Fields only the server sets.
        for key in (
            "uid",
            "creationTimestamp",
            "namespace",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if key in old_meta:
                new_meta[key] = old_meta[key]
            else:
                new_meta.pop(key, None)
        new_meta["name"] = name
        new["apiVersion"] = rtype.api_version
        new["kind"] = rtype.kind
        if rtype.has_status:
            if subresource == "status":
                # A status write changes status only (and may not resurrect spec edits).
                keep = {k: v for k, v in stored.items() if k != "status"}
                new = {**_copy(keep), "status": new.get("status", {})}
                new_meta = new["metadata"]
            else:
                if "status" in stored:
                    new["status"] = _copy(stored["status"])
                else:
                    new.pop("status", None)
        if "generation" in old_meta and stored.get("spec") != new.get("spec"):
            new_meta["generation"] = old_meta["generation"] + 1
        if _same_except_rv(stored, new):
            return _copy(stored)  # a no-op write does not bump the version
        new_meta["resourceVersion"] = str(self._history.next_revision())
        # An object being deleted goes once its last finalizer is removed.
        if (
            old_meta.get("deletionTimestamp")
            and not new_meta.get("finalizers")
            and (rtype.key != "pods" or not old_meta.get("deletionGracePeriodSeconds"))
        ):
            self._table.put(rtype, ident, new)
            self._commit(rtype, "MODIFIED", stored, new)
            return self._remove(rtype, ident, propagation="Background")
        self._table.put(rtype, ident, new)
        self._commit(rtype, "MODIFIED", stored, new)
        return _copy(new)

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        *,
        grace_period_s: int | None = None,
        propagation: str | None = None,
        precondition_uid: str | None = None,
        precondition_rv: str | None = None,
    ) -> Obj:
        """Delete, gracefully where the real server is graceful.

        Returns the object as it is after the call: with ``deletionTimestamp``
        when deletion is pending, else as it was when removed.
        """
        ident = self._table.ident(rtype, namespace, name)
        stored = self._table.find(rtype, ident)
        if stored is None:
            raise NotFound.of(rtype.group, rtype.plural, name)
        meta = stored["metadata"]
        if precondition_uid and precondition_uid != meta["uid"]:
            raise Conflict(
                f"Precondition failed: UID in precondition: {precondition_uid}, "
                f"UID in object meta: {meta['uid']}"
            )
        if precondition_rv and precondition_rv != meta["resourceVersion"]:
            raise Conflict.stale(rtype.group, rtype.plural, name)
        if propagation not in (None, "Background", "Foreground", "Orphan"):
            raise BadRequest(
                f"propagationPolicy {propagation!r} is not one of Background, Foreground, Orphan"
            )
        graceful = (
            rtype.key == "pods"
            and stored.get("spec", {}).get("nodeName")
            and _pod_grace(stored, grace_period_s) > 0
        )
        if graceful or meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                # Already terminating: a shorter grace period may still apply.
                if (
                    graceful
                    and grace_period_s is not None
                    and grace_period_s < meta.get("deletionGracePeriodSeconds", 0)
                ):
                    return self._mark_deleting(rtype, ident, stored, grace_period_s)
                return _copy(stored)
            grace = _pod_grace(stored, grace_period_s) if graceful else 0
            return self._mark_deleting(rtype, ident, stored, grace)
        return self._remove(rtype, ident, propagation=propagation or "Background")

    def _mark_deleting(self, rtype: ResourceType, ident: Ident, stored: Obj, grace_s: int) -> Obj:
        new = _copy(stored)
        meta = new["metadata"]
        meta["deletionTimestamp"] = rfc3339(self._clock())
        meta["deletionGracePeriodSeconds"] = grace_s
        meta["resourceVersion"] = str(self._history.next_revision())
        self._table.put(rtype, ident, new)
        self._commit(rtype, "MODIFIED", stored, new)
        return _copy(new)

    def _remove(self, rtype: ResourceType, ident: Ident, *, propagation: str) -> Obj:
        stored = self._table.pop(rtype, ident)
        gone = _copy(stored)
        gone["metadata"]["resourceVersion"] = str(self._history.next_revision())
        self._commit(rtype, "DELETED", stored, gone)
        self._collector.owner_removed(stored["metadata"]["uid"], propagation=propagation)
        if rtype.key == "namespaces":
            self._empty_namespace(stored["metadata"]["name"])
        return _copy(gone)

    def _empty_namespace(self, namespace: str) -> None:
        for rtype in self._table.namespaced_types():
            for ident in self._table.idents_in(rtype, namespace):
                # Removing one may have removed others (its dependents).
                if self._table.find(rtype, ident) is not None:
                    self._remove(rtype, ident, propagation="Background")

    # --- watch -------------------------------------------------------------------

    def watch(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> Watcher:
        """Start a watch (:meth:`WatchHistory.watch`). Raises Gone when
        ``resource_version`` is too old."""
        return self._history.watch(
            rtype,
            namespace=namespace,
            resource_version=resource_version,
            labels=labels,
            fields=fields,
        )

    def close_watchers(self, rtype: ResourceType | None = None) -> int:
        """Cut watch streams (fault injection); returns how many were closed."""
        return self._history.close_watchers(rtype)

    def compact(self) -> None:
        """Forget all history (fault injection: every resumed watch gets 410 Gone)."""
        self._history.compact()
