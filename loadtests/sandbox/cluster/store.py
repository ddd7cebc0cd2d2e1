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
  A selector watch sees an object that stops matching as DELETED and one that
  starts matching as ADDED, as the real watch cache does. A watcher that
  falls too far behind is closed, so a stuck client cannot grow memory
  without bound; it re-watches and, if needed, re-lists.

Objects handed out by ``get``/``list``/writes are the caller's copies. Watch
events share one object between all watchers: never mutate an event object.

Everything runs on one event loop and no method awaits, so each write is
atomic with respect to every reader.
"""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from loadtests.sandbox.cluster.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    NotFound,
)
from loadtests.sandbox.cluster.resources import RESOURCES, ResourceType
from loadtests.sandbox.cluster.selectors import FieldSelector, LabelSelector

__all__ = ["Store", "WatchEvent", "Watcher", "copy_object", "parse_rfc3339", "rfc3339"]

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


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: Obj  # shared between watchers: do not mutate


@dataclass(slots=True)
class _Record:
    """A write as the history keeps it: the object before and after."""

    rv: int
    rtype: ResourceType
    type: str
    old: Obj | None
    new: Obj


class Watcher:
    """One watch stream. Iterate it; ``close()`` ends it."""

    def __init__(
        self,
        store: Store,
        rtype: ResourceType,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        max_pending: int,
    ) -> None:
        self._store = store
        self.rtype = rtype
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self._queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue()
        self._max_pending = max_pending
        self.closed = False
        self.overflowed = False
        # The last resourceVersion this watcher has seen (the API server's bookmarks).
        self.last_rv = 0

    def _visible(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)

    def _offer(self, record: _Record) -> None:
        if self.closed:
            return
        was, now = self._visible(record.old), self._visible(record.new)
        if record.type == "DELETED":
            event_type = "DELETED" if was or now else None
        elif was and now:
            event_type = "MODIFIED"
        elif now:
            event_type = "ADDED"
        elif was:
            event_type = "DELETED"
        else:
            event_type = None
        self.last_rv = record.rv
        if event_type is None:
            return
        self._put(WatchEvent(event_type, record.new))

    def _put(self, event: WatchEvent) -> None:
        if self._queue.qsize() >= self._max_pending:
            # Too far behind: end the stream; the client re-watches from its
            # last version or re-lists after a 410, as with a real server.
            self.overflowed = True
            self.close()
            return
        self._queue.put_nowait(event)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._store._watchers.discard(self)
            self._queue.put_nowait(None)

    async def next(self, timeout_s: float | None = None) -> WatchEvent | None:
        """The next event; ``None`` when closed, or on timeout (the watcher stays open)."""
        if self.closed and self._queue.empty():
            return None
        if not self._queue.empty():
            event = self._queue.get_nowait()
        else:
            try:
                event = await asyncio.wait_for(self._queue.get(), timeout_s)
            except TimeoutError:
                return None
        if event is None:
            self._queue.put_nowait(None)  # keep returning None once closed
        return event

    def pending(self) -> int:
        return self._queue.qsize()

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[WatchEvent]:
        while True:
            event = await self.next()
            if event is None:
                return
            yield event


def _owner_uids(obj: Obj | None) -> frozenset[str]:
    if obj is None:
        return frozenset()
    refs = obj["metadata"].get("ownerReferences") or ()
    return frozenset(uid for ref in refs if isinstance(uid := ref.get("uid"), str))


class Store:
    def __init__(
        self,
        *,
        resources: Iterable[ResourceType] = RESOURCES,
        history_size: int = 20_000,
        max_pending_per_watcher: int = 50_000,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._types = {r.key: r for r in resources}
        self._type_order = {key: i for i, key in enumerate(self._types)}
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {k: {} for k in self._types}
        # Garbage collection looks objects up by uid and by owner uid; these
        # indexes keep a delete proportional to its dependents, not to the
        # cluster. Only ``_put`` and ``_pop`` touch ``_objects``, and they keep
        # both current. ``_owned`` is ``owner uid -> {(type key, ident)}``, in
        # the order the references appeared (a dict as an ordered set).
        self._uids: set[str] = set()
        self._owned: dict[str, dict[tuple[str, tuple[str, str]], None]] = {}
        self._rv = 0
        self._history: deque[_Record] = deque(maxlen=history_size)
        self._watchers: set[Watcher] = set()
        self._max_pending = max_pending_per_watcher
        self._clock = clock
        # Called after every committed write, for in-process controllers that
        # want to react without a watch (cheap and synchronous; must not raise).
        self._listeners: list[Callable[[ResourceType, str, Obj | None, Obj], None]] = []

    # --- bookkeeping -----------------------------------------------------------

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def now(self) -> datetime:
        return self._clock()

    def resource_type(self, key: str) -> ResourceType:
        return self._types[key]

    def add_listener(self, listener: Callable[[ResourceType, str, Obj | None, Obj], None]) -> None:
        self._listeners.append(listener)

    def _commit(self, rtype: ResourceType, event_type: str, old: Obj | None, new: Obj) -> None:
        record = _Record(self._rv, rtype, event_type, old, new)
        self._history.append(record)
        for watcher in list(self._watchers):
            if watcher.rtype.key == rtype.key:
                watcher._offer(record)
        for listener in self._listeners:
            listener(rtype, event_type, old, new)

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    @staticmethod
    def _ident(rtype: ResourceType, namespace: str | None, name: str) -> tuple[str, str]:
        return ((namespace or "") if rtype.namespaced else "", name)

    def _put(self, rtype: ResourceType, ident: tuple[str, str], obj: Obj) -> None:
        """Store ``obj`` at ``ident`` (new or replacing), keeping the uid indexes current."""
        old = self._objects[rtype.key].get(ident)
        self._objects[rtype.key][ident] = obj
        if old is None:
            self._uids.add(obj["metadata"]["uid"])
        self._reindex_owners((rtype.key, ident), _owner_uids(old), _owner_uids(obj))

    def _pop(self, rtype: ResourceType, ident: tuple[str, str]) -> Obj:
        obj = self._objects[rtype.key].pop(ident)
        self._uids.discard(obj["metadata"]["uid"])
        self._reindex_owners((rtype.key, ident), _owner_uids(obj), frozenset())
        return obj

    def _reindex_owners(
        self,
        entry: tuple[str, tuple[str, str]],
        before: frozenset[str],
        after: frozenset[str],
    ) -> None:
        for uid in before - after:
            bucket = self._owned[uid]
            del bucket[entry]
            if not bucket:
                del self._owned[uid]
        for uid in after - before:
            self._owned.setdefault(uid, {})[entry] = None

    # --- reads -------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self._objects[rtype.key].get(self._ident(rtype, namespace, name))
        if obj is None:
            raise NotFound.of(rtype.group, rtype.plural, name)
        return _copy(obj)

    def peek(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The stored object itself, not a copy, or None: read it, never mutate it."""
        return self._objects[rtype.key].get(self._ident(rtype, namespace, name))

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
        # Filter first and sort only what matched: a namespaced list of a few
        # pods must not pay for sorting every pod in the cluster.
        by_namespace = namespace is not None and rtype.namespaced
        matched = []
        for ident, obj in self._objects[rtype.key].items():
            if by_namespace and ident[0] != namespace:
                continue
            if labels is not None and not labels.matches(obj["metadata"].get("labels")):
                continue
            if fields is not None and not fields.matches(obj):
                continue
            matched.append((ident, obj))
        matched.sort(key=lambda pair: pair[0])
        items = [_copy(obj) if copy else obj for _, obj in matched]
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
            if rtype.key != "namespaces" and ns not in self._namespaces():
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
        ident = self._ident(rtype, meta.get("namespace"), meta["name"])
        if ident in self._objects[rtype.key]:
            raise AlreadyExists.of(rtype.group, rtype.plural, meta["name"])
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self._clock())
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        if "spec" in obj or rtype.has_status:
            meta["generation"] = 1
        meta["resourceVersion"] = str(self._next_rv())
        self._put(rtype, ident, obj)
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
        ident = self._ident(rtype, ns, name)
        stored = self._objects[rtype.key].get(ident)
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
        if self._same_except_rv(stored, new):
            return _copy(stored)  # a no-op write does not bump the version
        new_meta["resourceVersion"] = str(self._next_rv())
        # An object being deleted goes once its last finalizer is removed.
        if (
            old_meta.get("deletionTimestamp")
            and not new_meta.get("finalizers")
            and (rtype.key != "pods" or not old_meta.get("deletionGracePeriodSeconds"))
        ):
            self._put(rtype, ident, new)
            self._commit(rtype, "MODIFIED", stored, new)
            return self._remove(rtype, ident, propagation="Background")
        self._put(rtype, ident, new)
        self._commit(rtype, "MODIFIED", stored, new)
        return _copy(new)

    @staticmethod
    def _same_except_rv(a: Obj, b: Obj) -> bool:
        ma = {k: v for k, v in a["metadata"].items() if k != "resourceVersion"}
        mb = {k: v for k, v in b["metadata"].items() if k != "resourceVersion"}
        return ma == mb and {k: v for k, v in a.items() if k != "metadata"} == {
            k: v for k, v in b.items() if k != "metadata"
        }

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
        ident = self._ident(rtype, namespace, name)
        stored = self._objects[rtype.key].get(ident)
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
            and self._pod_grace(stored, grace_period_s) > 0
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
            grace = self._pod_grace(stored, grace_period_s) if graceful else 0
            return self._mark_deleting(rtype, ident, stored, grace)
        return self._remove(rtype, ident, propagation=propagation or "Background")

    @staticmethod
    def _pod_grace(pod: Obj, requested: int | None) -> int:
        if requested is not None:
            return max(0, requested)
        return int(pod.get("spec", {}).get("terminationGracePeriodSeconds", 30))

    def _mark_deleting(
        self, rtype: ResourceType, ident: tuple[str, str], stored: Obj, grace_s: int
    ) -> Obj:
        new = _copy(stored)
        meta = new["metadata"]
        meta["deletionTimestamp"] = rfc3339(self._clock())
        meta["deletionGracePeriodSeconds"] = grace_s
        meta["resourceVersion"] = str(self._next_rv())
        self._put(rtype, ident, new)
        self._commit(rtype, "MODIFIED", stored, new)
        return _copy(new)

    def _remove(self, rtype: ResourceType, ident: tuple[str, str], *, propagation: str) -> Obj:
        stored = self._pop(rtype, ident)
        gone = _copy(stored)
        gone["metadata"]["resourceVersion"] = str(self._next_rv())
        self._commit(rtype, "DELETED", stored, gone)
        uid = stored["metadata"]["uid"]
        if propagation == "Orphan":
            self._orphan_dependents(uid)
        else:
            self._collect_dependents(uid)
        if rtype.key == "namespaces":
            self._empty_namespace(stored["metadata"]["name"])
        return _copy(gone)

    def _dependents(self, owner_uid: str) -> builtins.list[tuple[ResourceType, Obj]]:
        """The objects that reference ``owner_uid``, by type (in table order), then age."""
        entries = sorted(self._owned.get(owner_uid, ()), key=lambda e: self._type_order[e[0]])
        return [(self._types[key], self._objects[key][ident]) for key, ident in entries]

    def _collect_dependents(self, owner_uid: str) -> None:
        for rtype, obj in self._dependents(owner_uid):
            meta = obj["metadata"]
            others = [r for r in meta["ownerReferences"] if r.get("uid") != owner_uid]
            live_others = [r for r in others if self._uid_exists(r.get("uid", ""))]
            if live_others:
                # Still owned by someone alive: just drop the dangling reference.
                self.update(rtype, {**obj, "metadata": {**meta, "ownerReferences": others}})
                continue
            if self.peek(rtype, meta.get("namespace"), meta["name"]) is not None:
                self.delete(rtype, meta.get("namespace"), meta["name"])

    def _orphan_dependents(self, owner_uid: str) -> None:
        for rtype, obj in self._dependents(owner_uid):
            meta = obj["metadata"]
            refs = [r for r in meta["ownerReferences"] if r.get("uid") != owner_uid]
            new_meta = {k: v for k, v in meta.items() if k != "ownerReferences"}
            if refs:
                new_meta["ownerReferences"] = refs
            self.update(rtype, {**obj, "metadata": new_meta})

    def _uid_exists(self, uid: str) -> bool:
        return uid in self._uids

    def _namespaces(self) -> set[str]:
        return {name for (_ns, name) in self._objects.get("namespaces", {})}

    def _empty_namespace(self, namespace: str) -> None:
        for key, objects in self._objects.items():
            rtype = self._types[key]
            if not rtype.namespaced:
                continue
            for ns, name in [i for i in objects if i[0] == namespace]:
                if (ns, name) in objects:
                    self._remove(rtype, (ns, name), propagation="Background")

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
        """Start a watch. Raises Gone when ``resource_version`` is too old."""
        watcher = Watcher(
            self,
            rtype,
            namespace=namespace if rtype.namespaced else None,
            labels=labels or LabelSelector(),
            fields=fields or FieldSelector(),
            max_pending=self._max_pending,
        )
        if resource_version in (None, "", "0"):
            items, _ = self.list(
                rtype,
                namespace=watcher.namespace,
                labels=watcher.labels,
                fields=watcher.fields,
                copy=False,
            )
            for obj in items:
                watcher._put(WatchEvent("ADDED", obj))
            watcher.last_rv = self._rv
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise BadRequest(f"invalid resource version: {resource_version!r}") from None
            oldest = self._history[0].rv if self._history else self._rv + 1
            if since < oldest - 1 and since < self._rv:
                raise Gone(f"too old resource version: {since} ({oldest - 1})")
            for record in self._history:
                if record.rv > since and record.rtype.key == rtype.key:
                    watcher._offer(record)
            watcher.last_rv = max(watcher.last_rv, since, self._rv)
        self._watchers.add(watcher)
        return watcher

    def close_watchers(self, rtype: ResourceType | None = None) -> int:
        """Cut watch streams (fault injection); returns how many were closed."""
        victims = [w for w in self._watchers if rtype is None or w.rtype.key == rtype.key]
        for watcher in victims:
            watcher.close()
        return len(victims)

    def compact(self) -> None:
        """Forget all history (fault injection: every resumed watch gets 410 Gone)."""
        self._history.clear()
