"""The stored objects by type and name, with the two indexes a delete needs.

The table is the store's memory and no more: each object at its
(namespace, name) under its type, and two indexes kept current on every put
and pop, so that a delete costs in proportion to its dependents, not to the
cluster: the uids that exist, and for each owner uid the objects whose
``ownerReferences`` name it, in the order the references appeared (a dict as
an ordered set).

It knows no API rule (versions, conflicts, grace periods): the
:class:`~loadtests.sandbox.cluster.store.Store` decides what is written and
is the only caller of :meth:`ObjectTable.put` and :meth:`ObjectTable.pop`.
The objects it hands out are the stored ones, not copies: read them, never
mutate them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.selectors import FieldSelector, LabelSelector

__all__ = ["Ident", "ObjectTable"]

Obj = dict[str, Any]
# (namespace, name); the namespace is "" for a cluster-scoped type.
Ident = tuple[str, str]
# (type key, ident): one object, as the owner index names it.
Entry = tuple[str, Ident]


def _owner_uids(obj: Obj | None) -> frozenset[str]:
    if obj is None:
        return frozenset()
    refs = obj["metadata"].get("ownerReferences") or ()
    return frozenset(uid for ref in refs if isinstance(uid := ref.get("uid"), str))


class ObjectTable:
    """Every stored object, found by type and ident, by uid, or by owner."""

    def __init__(self, resources: Iterable[ResourceType]) -> None:
        self._types = {r.key: r for r in resources}
        self._type_order = {key: i for i, key in enumerate(self._types)}
        self._objects: dict[str, dict[Ident, Obj]] = {k: {} for k in self._types}
        self._uids: set[str] = set()
        self._owned: dict[str, dict[Entry, None]] = {}

    def resource_type(self, key: str) -> ResourceType:
        return self._types[key]

    @staticmethod
    def ident(rtype: ResourceType, namespace: str | None, name: str) -> Ident:
        return ((namespace or "") if rtype.namespaced else "", name)

    def find(self, rtype: ResourceType, ident: Ident) -> Obj | None:
        return self._objects[rtype.key].get(ident)

    def select(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> list[Obj]:
        """Matching objects sorted by namespace and name."""
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
        return [obj for _, obj in matched]

    def has_uid(self, uid: str) -> bool:
        return uid in self._uids

    def namespaces(self) -> set[str]:
        return {name for (_ns, name) in self._objects.get("namespaces", {})}

    def namespaced_types(self) -> list[ResourceType]:
        """The namespaced types, in table order."""
        return [rtype for rtype in self._types.values() if rtype.namespaced]

    def idents_in(self, rtype: ResourceType, namespace: str) -> list[Ident]:
        """The idents of ``rtype`` in ``namespace`` now (a list: the caller may remove them)."""
        return [ident for ident in self._objects[rtype.key] if ident[0] == namespace]

    def dependents(self, owner_uid: str) -> list[tuple[ResourceType, Obj]]:
        """The objects that reference ``owner_uid``, by type (in table order), then age."""
        entries = sorted(self._owned.get(owner_uid, ()), key=lambda e: self._type_order[e[0]])
        return [(self._types[key], self._objects[key][ident]) for key, ident in entries]

    def put(self, rtype: ResourceType, ident: Ident, obj: Obj) -> None:
        """Store ``obj`` at ``ident`` (new or replacing), keeping the indexes current."""
        old = self._objects[rtype.key].get(ident)
        self._objects[rtype.key][ident] = obj
        if old is None:
            self._uids.add(obj["metadata"]["uid"])
        self._reindex_owners((rtype.key, ident), _owner_uids(old), _owner_uids(obj))

    def pop(self, rtype: ResourceType, ident: Ident) -> Obj:
        obj = self._objects[rtype.key].pop(ident)
        self._uids.discard(obj["metadata"]["uid"])
        self._reindex_owners((rtype.key, ident), _owner_uids(obj), frozenset())
        return obj

    def _reindex_owners(self, entry: Entry, before: frozenset[str], after: frozenset[str]) -> None:
        for uid in before - after:
            bucket = self._owned[uid]
            del bucket[entry]
            if not bucket:
                del self._owned[uid]
        for uid in after - before:
            self._owned.setdefault(uid, {})[entry] = None
