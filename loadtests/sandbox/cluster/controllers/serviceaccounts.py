"""Every namespace gets its ``default`` ServiceAccount, as the real controller gives it.

Pods name ``serviceAccountName: default`` unless told otherwise, and clients
(kubectl, the official client) expect it to exist; the API server maps tokens
to ServiceAccounts. The controller also marks new namespaces ``Active``.
"""

from __future__ import annotations

import contextlib

from loadtests.sandbox.cluster.controllers.base import (
    NAMESPACES,
    SERVICEACCOUNTS,
    Cache,
    Controller,
    Obj,
)
from loadtests.sandbox.cluster.errors import AlreadyExists, NotFound
from loadtests.sandbox.cluster.store import Store

__all__ = ["ServiceAccountController"]


class ServiceAccountController(Controller):
    name = "serviceaccount-controller"

    def __init__(self, store: Store, cache: Cache) -> None:
        super().__init__(store, cache)
        cache.on(NAMESPACES, self._on_namespace)
        cache.on(SERVICEACCOUNTS, self._on_account)
        for ns in store.list(NAMESPACES, copy=False)[0]:
            self.queue.add(ns["metadata"]["name"])

    def _on_namespace(self, _event: str, _old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.queue.add(new["metadata"]["name"])

    def _on_account(self, event: str, old: Obj | None, _new: Obj | None) -> None:
        if event == "DELETED" and old is not None and old["metadata"]["name"] == "default":
            self.queue.add(old["metadata"]["namespace"])

    def reconcile(self, key: str) -> float | None:
        ns = self.store.peek(NAMESPACES, "", key)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return None
        if (ns.get("status") or {}).get("phase") != "Active":
            with contextlib.suppress(NotFound):
                self.store.update(
                    NAMESPACES, {**ns, "status": {"phase": "Active"}}, subresource="status"
                )
        if self.store.peek(SERVICEACCOUNTS, key, "default") is None:
            with contextlib.suppress(AlreadyExists, NotFound):
                self.store.create(SERVICEACCOUNTS, {"metadata": {"name": "default"}}, namespace=key)
        return None
