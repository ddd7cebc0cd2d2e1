"""What every in-process controller shares: the index, the work queue, the loop.

Real controllers watch the API server through informers, keep a local cache
with indexes, and reconcile keys taken from a de-duplicating work queue. Ours
do the same without HTTP: one :class:`Cache` subscribes to the store's
synchronous change listener and keeps the indexes the controllers query
(pods by owner, by node, by namespace; objects by owner), and each
:class:`Controller` reconciles keys from its own :class:`WorkQueue`.

The store never mutates an object it has stored (every write stores a fresh
dict), so the cache holds the store's own objects, not copies: reading them
is free, and mutating them is forbidden. A controller that writes builds a
new dict.

Reconciling is synchronous (store calls never await), so each key is handled
atomically; the loop yields to the event loop between keys so that the API
server stays responsive while a controller works through a long queue. A
reconcile that raises is logged and retried with a growing delay, never
killing the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Hashable, Iterable
from datetime import datetime
from typing import Any

from loadtests.sandbox.cluster.errors import AlreadyExists, ApiError, Conflict, NotFound
from loadtests.sandbox.cluster.resources import ResourceType, by_group_version_plural
from loadtests.sandbox.cluster.store import Store, rfc3339

__all__ = [
    "DEPLOYMENTS",
    "ENDPOINTSLICES",
    "EVENTS",
    "NAMESPACES",
    "NODES",
    "PODS",
    "REPLICASETS",
    "SERVICEACCOUNTS",
    "SERVICES",
    "Cache",
    "Controller",
    "EventRecorder",
    "Obj",
    "WorkQueue",
    "condition",
    "controller_ref",
    "controller_uid",
    "is_pod_active",
    "is_pod_ready",
    "set_condition",
]

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped types

log = logging.getLogger("tidal.sandbox.controllers")


def _rtype(group: str, plural: str) -> ResourceType:
    rtype = by_group_version_plural(group, "v1", plural)
    assert rtype is not None, plural
    return rtype


PODS = _rtype("", "pods")
NODES = _rtype("", "nodes")
SERVICES = _rtype("", "services")
NAMESPACES = _rtype("", "namespaces")
SERVICEACCOUNTS = _rtype("", "serviceaccounts")
EVENTS = _rtype("", "events")
DEPLOYMENTS = _rtype("apps", "deployments")
REPLICASETS = _rtype("apps", "replicasets")
ENDPOINTSLICES = _rtype("discovery.k8s.io", "endpointslices")


def key_of(obj: Obj) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def controller_ref(owner: Obj, *, kind: str, api_version: str) -> Obj:
    """The ``ownerReferences`` entry a controller puts on what it creates for ``owner``."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Obj) -> str | None:
    """The uid of the object's controlling owner (``controller: true``), if any."""
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def is_pod_active(pod: Obj) -> bool:
    """Not terminating and not in a terminal phase (the controllers' ``IsPodActive``)."""
    return not pod["metadata"].get("deletionTimestamp") and pod.get("status", {}).get(
        "phase"
    ) not in ("Succeeded", "Failed")


def condition(obj: Obj, kind: str) -> Obj | None:
    for cond in obj.get("status", {}).get("conditions") or ():
        if cond.get("type") == kind:
            return dict(cond)
    return None


def is_pod_ready(pod: Obj) -> bool:
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def set_condition(
    conditions: list[Obj],
    *,
    kind: str,
    status: str,
    reason: str | None,
    message: str | None,
    now: datetime,
    with_update_time: bool = False,
    with_probe_time: bool = False,
) -> list[Obj]:
    """Conditions with ``kind`` set; ``lastTransitionTime`` moves only when status does.

    Deployments carry ``lastUpdateTime`` (moved on any change); pods carry
    ``lastProbeTime`` (null, as the kubelet and scheduler leave it).
    """
    stamp = rfc3339(now)
    out = [dict(c) for c in conditions]
    at = next((i for i, c in enumerate(out) if c.get("type") == kind), None)
    old = out[at] if at is not None else {}
    wanted = (status, reason, message)
    if at is not None and (old.get("status"), old.get("reason"), old.get("message")) == wanted:
        return out
    new: Obj = {"type": kind, "status": status}
    if with_probe_time:
        new["lastProbeTime"] = None
    if with_update_time:
        new["lastUpdateTime"] = stamp
    new["lastTransitionTime"] = (
        old.get("lastTransitionTime", stamp) if old.get("status") == status else stamp
    )
    if reason is not None:
        new["reason"] = reason
    if message is not None:
        new["message"] = message
    if at is None:
        out.append(new)
    else:
        out[at] = new
    return out


class _Index:
    """``index value -> {(namespace, name): object}`` for one resource type."""

    def __init__(self, extract: Callable[[Obj], Iterable[str]]) -> None:
        self.extract = extract
        self.buckets: dict[str, dict[Key, Obj]] = {}

    def remove(self, obj: Obj) -> None:
        k = key_of(obj)
        for value in self.extract(obj):
            bucket = self.buckets.get(value)
            if bucket is not None:
                bucket.pop(k, None)
                if not bucket:
                    del self.buckets[value]

    def add(self, obj: Obj) -> None:
        k = key_of(obj)
        for value in self.extract(obj):
            self.buckets.setdefault(value, {})[k] = obj

    def get(self, value: str) -> list[Obj]:
        return list(self.buckets.get(value, {}).values())


Handler = Callable[[str, Obj | None, Obj | None], None]


class Cache:
    """Indexes over the store's objects, kept current by a store listener.

    ``on(rtype, handler)`` registers ``handler(event_type, old, new)`` for
    changes of one type (``new`` is ``None`` for DELETED), which is how the
    controllers enqueue keys. Handlers run inside the store's write, so they
    must only record work, never write to the store themselves.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._indexes: dict[str, dict[str, _Index]] = {}
        self._handlers: dict[str, list[Handler]] = {}
        self.add_index(PODS, "owner", lambda o: _opt(controller_uid(o)))
        self.add_index(PODS, "node", lambda o: _opt(o.get("spec", {}).get("nodeName")))
        self.add_index(PODS, "namespace", lambda o: (o["metadata"].get("namespace", ""),))
        self.add_index(REPLICASETS, "owner", lambda o: _opt(controller_uid(o)))
        self.add_index(SERVICES, "namespace", lambda o: (o["metadata"].get("namespace", ""),))
        self.add_index(
            ENDPOINTSLICES,
            "service",
            lambda o: _opt(
                f"{o['metadata'].get('namespace', '')}/{svc}"
                if (svc := (o["metadata"].get("labels") or {}).get("kubernetes.io/service-name"))
                else None
            ),
        )
        store.add_listener(self._on_change)

    def add_index(
        self, rtype: ResourceType, name: str, extract: Callable[[Obj], Iterable[str]]
    ) -> None:
        index = _Index(extract)
        self._indexes.setdefault(rtype.key, {})[name] = index
        for obj in self.store.list(rtype, copy=False)[0]:
            index.add(obj)

    def on(self, rtype: ResourceType, handler: Handler) -> None:
        self._handlers.setdefault(rtype.key, []).append(handler)

    def by(self, rtype: ResourceType, index: str, value: str) -> list[Obj]:
        return self._indexes[rtype.key][index].get(value)

    def index_values(self, rtype: ResourceType, index: str) -> list[str]:
        return list(self._indexes[rtype.key][index].buckets)

    def _on_change(self, rtype: ResourceType, event_type: str, old: Obj | None, new: Obj) -> None:
        indexes = self._indexes.get(rtype.key)
        if indexes:
            for index in indexes.values():
                if old is not None:
                    index.remove(old)
                if event_type != "DELETED":
                    index.add(new)
        for handler in self._handlers.get(rtype.key, ()):
            try:
                handler(event_type, old, None if event_type == "DELETED" else new)
            except Exception:  # a handler bug must not break the store's write
                log.exception("change handler for %s failed", rtype.key)


def _opt(value: str | None) -> tuple[str, ...]:
    return (value,) if value else ()


class WorkQueue:
    """A de-duplicating FIFO of keys, with delayed adds (``add_after``)."""

    def __init__(self) -> None:
        self._keys: dict[Hashable, None] = {}
        self._wakeup = asyncio.Event()
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}

    def add(self, key: Hashable) -> None:
        self._keys[key] = None
        self._wakeup.set()

    def add_after(self, key: Hashable, delay_s: float) -> None:
        """Add ``key`` after ``delay_s``; an earlier pending add wins over a later one."""
        if delay_s <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay_s
        timer = self._timers.get(key)
        if timer is not None and not timer.cancelled() and timer.when() <= when:
            return
        if timer is not None:
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def __len__(self) -> int:
        return len(self._keys)

    async def take(self) -> Hashable:
        while not self._keys:
            self._wakeup.clear()
            await self._wakeup.wait()
        key = next(iter(self._keys))
        del self._keys[key]
        return key

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


class Controller:
    """A reconcile loop over one :class:`WorkQueue`.

    Subclasses implement ``reconcile(key)``, returning ``None`` or a delay in
    seconds after which the key should be looked at again (a deadline, a
    minReadySeconds wait).
    """

    name = "controller"
    retry_base_s = 0.05
    retry_cap_s = 5.0

    def __init__(self, store: Store, cache: Cache) -> None:
        self.store = store
        self.cache = cache
        self.queue = WorkQueue()
        self._failures: dict[Hashable, int] = {}
        self.reconciles = 0

    def reconcile(self, key: Any) -> float | None:
        raise NotImplementedError

    async def run(self) -> None:
        try:
            while True:
                key = await self.queue.take()
                self._reconcile_one(key)
                # Yield so that the API server and the other controllers get
                # their turn while a long queue drains.
                await asyncio.sleep(0)
        finally:
            self.queue.close()

    def _reconcile_one(self, key: Hashable) -> None:
        self.reconciles += 1
        try:
            again = self.reconcile(key)
        except (Conflict, AlreadyExists, NotFound) as exc:
            # Raced with another writer: look again soon, from fresh state.
            log.debug("%s: %s on %s; retrying", self.name, exc.reason, key)
            self._retry(key)
            return
        except ApiError as exc:
            log.warning("%s: reconciling %s failed: %s", self.name, key, exc.message)
            self._retry(key)
            return
        except Exception:
            log.exception("%s: reconciling %s failed", self.name, key)
            self._retry(key)
            return
        self._failures.pop(key, None)
        if again is not None:
            self.queue.add_after(key, again)

    def _retry(self, key: Hashable) -> None:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        self.queue.add_after(key, min(self.retry_cap_s, self.retry_base_s * 2 ** (failures - 1)))


class EventRecorder:
    """Writes core/v1 Events as client-go's recorder does, folding repeats into ``count``."""

    def __init__(self, store: Store, *, component: str, host: str | None = None) -> None:
        self.store = store
        self.component = component
        self.host = host
        self._seen: dict[tuple[str, ...], str] = {}  # dedup key -> event name

    def record(
        self,
        obj: Obj,
        *,
        event_type: str,
        reason: str,
        message: str,
        component: str | None = None,
        host: str | None = None,
    ) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        dedup = (meta.get("uid", ""), event_type, reason, message)
        now = rfc3339(self.store.now())
        name = self._seen.get(dedup)
        if name is not None:
            existing = self.store.peek(EVENTS, namespace, name)
            if existing is not None:
                self.store.update(
                    EVENTS,
                    {**existing, "count": int(existing.get("count", 1)) + 1, "lastTimestamp": now},
                )
                return
        involved = {
            "kind": obj.get("kind"),
            "namespace": meta.get("namespace"),
            "name": meta["name"],
            "uid": meta.get("uid"),
            "apiVersion": obj.get("apiVersion"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        source: Obj = {"component": component or self.component}
        if host or self.host:
            source["host"] = host or self.host
        event = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": component or self.component,
            "reportingInstance": host or self.host or "",
        }
        with contextlib.suppress(NotFound):  # the namespace is going away
            created = self.store.create(EVENTS, event, namespace=namespace)
            if len(self._seen) > 20_000:
                self._seen.clear()
            self._seen[dedup] = created["metadata"]["name"]
