"""Run ``tidal`` inside a sandbox pod, with cluster Service names resolvable.

The kubelet starts a pod of the Tidal image as ``python -m
loadtests.sandbox.cluster.pod_dns <tidal arguments>``: this module points
name resolution at the sandbox's DNS table (the JSON file named by
``$TIDAL_SANDBOX_DNS``, kept by
:class:`~loadtests.sandbox.cluster.controllers.cluster_dns.ClusterDns`),
then runs the ``tidal`` command line unchanged.

Names resolved from the table, as a pod's resolver with the cluster's
search path would: ``<service>``, ``<service>.<namespace>``, and those with
``.svc`` or ``.svc.cluster.local`` (a bare name is in ``$POD_NAMESPACE``).
Anything else, and a cluster name the table lacks, goes to the machine's
resolver. Both ways a name is looked up are covered: ``socket.getaddrinfo``
(asyncio's default loop calls it in a thread) and uvloop's own
``Loop.getaddrinfo``, which resolves in libuv without calling it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

__all__ = ["cluster_addresses", "install", "main"]

_SUFFIXES = (".svc.cluster.local", ".svc")


def cluster_addresses(host: str, table: dict[str, list[str]], namespace: str) -> list[str] | None:
    """The addresses of ``host`` when it names a Service of ``table``; else None."""
    name = host.rstrip(".")
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if "." not in name:
        name = f"{name}.{namespace}"
    addresses = table.get(name)
    return list(addresses) if addresses is not None else None


def _entries(addresses: list[str], port: Any, kind: int, proto: int) -> list[Any]:
    number = int(port) if port not in (None, "") else 0
    kinds = [kind] if kind else [socket.SOCK_STREAM]
    return [
        (socket.AF_INET, k, proto or socket.IPPROTO_TCP, "", (address, number))
        for address in addresses
        for k in kinds
    ]


def install(table_path: Path, namespace: str) -> None:
    """Resolve cluster names from ``table_path`` in this process from now on."""

    def lookup(host: Any) -> list[str] | None:
        if not isinstance(host, str):
            host = host.decode() if isinstance(host, bytes) else None
        if not host:
            return None
        try:
            table = json.loads(table_path.read_text())
        except (OSError, ValueError):
            return None
        return cluster_addresses(host, table, namespace)

    system = socket.getaddrinfo

    def getaddrinfo(
        host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> list[Any]:
        found = lookup(host)
        if found is None or family not in (0, socket.AF_INET):
            return system(host, port, family, type, proto, flags)
        return _entries(found, port, type, proto)

    socket.getaddrinfo = getaddrinfo
    try:
        import uvloop
    except ImportError:
        return
    loop_lookup = uvloop.Loop.getaddrinfo

    async def loop_getaddrinfo(
        self: Any,
        host: Any,
        port: Any,
        *,
        family: int = 0,
        type: int = 0,
        proto: int = 0,
        flags: int = 0,
    ) -> list[Any]:
        found = lookup(host)
        if found is None or family not in (0, socket.AF_INET):
            return await loop_lookup(
                self, host, port, family=family, type=type, proto=proto, flags=flags
            )
        return _entries(found, port, type, proto)

    uvloop.Loop.getaddrinfo = loop_getaddrinfo  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    table = os.environ.get("TIDAL_SANDBOX_DNS")
    if table:
        install(Path(table), os.environ.get("POD_NAMESPACE", "default"))
    from scaler.cli import main as tidal

    return tidal(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
