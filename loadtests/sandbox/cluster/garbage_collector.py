"""Garbage collection by ``ownerReferences``: what becomes of an object's dependents when it goes.

As the real garbage collector, through the store's own writes: with the
Background or Foreground cascade a dependent with no other live owner is
deleted (gracefully where a delete is graceful), and one that still has a
live owner only loses the dangling reference; with Orphan every dependent
keeps living without the reference. Dependents are visited by type (in the
resource table's order), then age.
"""

from __future__ import annotations

from typing import Any, Protocol

from loadtests.sandbox.cluster.object_table import ObjectTable
from loadtests.sandbox.cluster.resources import ResourceType

__all__ = ["GarbageCollector", "StoreWrites"]

Obj = dict[str, Any]


class StoreWrites(Protocol):
    """The store's writes and its cheap read, as the collector uses them."""

    def peek(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj | None: ...

    def update(self, rtype: ResourceType, obj: Obj) -> Obj: ...

    def delete(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj: ...


class GarbageCollector:
    """Deletes or orphans the dependents of a removed owner."""

    def __init__(self, table: ObjectTable, store: StoreWrites) -> None:
        self._table = table
        self._store = store

    def owner_removed(self, owner_uid: str, *, propagation: str) -> None:
        if propagation == "Orphan":
            self._orphan_dependents(owner_uid)
        else:
            self._collect_dependents(owner_uid)

    def _collect_dependents(self, owner_uid: str) -> None:
        for rtype, obj in self._table.dependents(owner_uid):
            meta = obj["metadata"]
            others = [r for r in meta["ownerReferences"] if r.get("uid") != owner_uid]
            live_others = [r for r in others if self._table.has_uid(r.get("uid", ""))]
            if live_others:
                # Still owned by someone alive: just drop the dangling reference.
                self._store.update(rtype, {**obj, "metadata": {**meta, "ownerReferences": others}})
                continue
            if self._store.peek(rtype, meta.get("namespace"), meta["name"]) is not None:
                self._store.delete(rtype, meta.get("namespace"), meta["name"])

    def _orphan_dependents(self, owner_uid: str) -> None:
        for rtype, obj in self._table.dependents(owner_uid):
            meta = obj["metadata"]
            refs = [r for r in meta["ownerReferences"] if r.get("uid") != owner_uid]
            new_meta = {k: v for k, v in meta.items() if k != "ownerReferences"}
            if refs:
                new_meta["ownerReferences"] = refs
            self._store.update(rtype, {**obj, "metadata": new_meta})
