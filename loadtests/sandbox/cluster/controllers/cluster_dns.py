"""Cluster DNS for the pods that run real Tidal: Service names to ready pod addresses.

A pod of the Tidal image (:mod:`tidal_pods`) finds its peers by Service
name, as on a cluster: the activator posts its reports to
``http://tidal-scaler.tidal-system:8090``, a headless Service whose name
resolves to every ready scaler pod. This machine's resolver knows no such
name, so the sandbox keeps a table of its own, ``<name>.<namespace>`` ->
the ready addresses of the Service's EndpointSlices, in a JSON file the
pods' resolver reads (:mod:`loadtests.sandbox.cluster.pod_dns`).

Every Service resolves to its ready pod addresses, headless or not: the
sandbox has no virtual IPs (no kube-proxy), and a client that picks one of
several addresses spreads its connections much as a ClusterIP would.

Main decision: changes mark the table dirty and one writer rewrites it at
most every ``WRITE_INTERVAL_S``, atomically (a temporary file renamed over
it), and only when it changed: EndpointSlices change on every pod's
readiness, and a scale test has thousands of pods.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from loadtests.sandbox.cluster.controllers.base import ENDPOINTSLICES, SERVICES, Cache, Obj
from loadtests.sandbox.cluster.store import ObjectReader, Store

__all__ = ["WRITE_INTERVAL_S", "ClusterDns", "dns_table"]

WRITE_INTERVAL_S = 0.2
_SERVICE_LABEL = "kubernetes.io/service-name"


def dns_table(store: ObjectReader) -> dict[str, list[str]]:
    """``{"<service>.<namespace>": [ready addresses, sorted]}`` for every Service."""
    table: dict[str, set[str]] = {}
    services, _ = store.list(SERVICES, copy=False)
    for service in services:
        meta = service["metadata"]
        table[f"{meta['name']}.{meta.get('namespace', 'default')}"] = set()
    slices, _ = store.list(ENDPOINTSLICES, copy=False)
    for piece in slices:
        meta = piece["metadata"]
        name = (meta.get("labels") or {}).get(_SERVICE_LABEL)
        key = f"{name}.{meta.get('namespace', 'default')}"
        if name is None or key not in table:
            continue
        for endpoint in piece.get("endpoints") or ():
            if (endpoint.get("conditions") or {}).get("ready"):
                table[key].update(endpoint.get("addresses") or ())
    return {key: sorted(addresses) for key, addresses in sorted(table.items())}


class ClusterDns:
    """Keeps ``path`` equal to :func:`dns_table` of the store."""

    name = "cluster-dns"

    def __init__(self, store: Store, cache: Cache, path: Path) -> None:
        self.store = store
        self.path = path
        self._dirty = asyncio.Event()
        self._dirty.set()
        self._written: dict[str, list[str]] | None = None
        cache.on(SERVICES, self._changed)
        cache.on(ENDPOINTSLICES, self._changed)

    def _changed(self, _event: str, _old: Obj | None, _new: Obj | None) -> None:
        self._dirty.set()

    def write(self) -> None:
        table = dns_table(self.store)
        if table == self._written:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(table, indent=1))
        os.replace(temporary, self.path)
        self._written = table

    async def run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            self.write()
            await asyncio.sleep(WRITE_INTERVAL_S)
