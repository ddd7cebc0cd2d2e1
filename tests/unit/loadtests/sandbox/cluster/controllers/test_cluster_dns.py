"""The sandbox's cluster DNS: the table it keeps and the names a pod resolves from it.

Covers: a Service maps to the ready addresses of its EndpointSlices (not
the unready ones, not another Service's), a Service with none maps to an
empty list; a pod resolves ``name``, ``name.namespace``, ``.svc`` and
``.svc.cluster.local`` forms, its own namespace for a bare name, and leaves
other names to the machine; the file is rewritten only on change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadtests.sandbox.cluster.controllers.base import (
    ENDPOINTSLICES,
    NAMESPACES,
    SERVICES,
    Cache,
)
from loadtests.sandbox.cluster.controllers.cluster_dns import ClusterDns, dns_table
from loadtests.sandbox.cluster.pod_dns import cluster_addresses
from loadtests.sandbox.cluster.store import Store


def _slice(name: str, service: str, endpoints: list[tuple[str, bool]]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "tidal-system",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [address], "conditions": {"ready": ready}} for address, ready in endpoints
        ],
    }


def test_table_and_file(tmp_path: Path) -> None:
    store = Store()
    store.create(NAMESPACES, {"metadata": {"name": "tidal-system"}})
    for name in ("tidal-scaler", "tidal-activator"):
        store.create(
            SERVICES, {"metadata": {"name": name, "namespace": "tidal-system"}, "spec": {}}
        )
    store.create(
        ENDPOINTSLICES,
        _slice("s-1", "tidal-scaler", [("127.9.1.2", True), ("127.9.1.1", True)]),
    )
    store.create(ENDPOINTSLICES, _slice("s-2", "tidal-scaler", [("127.9.1.3", False)]))
    assert dns_table(store) == {
        "tidal-activator.tidal-system": [],
        "tidal-scaler.tidal-system": ["127.9.1.1", "127.9.1.2"],
    }
    dns = ClusterDns(store, Cache(store), tmp_path / "dns.json")
    dns.write()
    assert json.loads(dns.path.read_text()) == dns_table(store)
    dns.path.write_text("{}")  # a marker: an unchanged table is not written again
    dns.write()
    assert dns.path.read_text() == "{}"


def test_names_a_pod_resolves() -> None:
    table = {"tidal-scaler.tidal-system": ["127.9.1.1", "127.9.1.2"]}
    for name in (
        "tidal-scaler.tidal-system",
        "tidal-scaler.tidal-system.svc",
        "tidal-scaler.tidal-system.svc.cluster.local.",
    ):
        assert cluster_addresses(name, table, "default") == ["127.9.1.1", "127.9.1.2"]
    assert cluster_addresses("tidal-scaler", table, "tidal-system") == ["127.9.1.1", "127.9.1.2"]
    assert cluster_addresses("tidal-scaler", table, "default") is None
    assert cluster_addresses("example.com", table, "default") is None
