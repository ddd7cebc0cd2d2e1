"""Where the scaler replicas are: every address of every ``--scaler-url``.

Every scaler replica keeps its own windows warm from the reports it receives,
and only the leader writes to the API (docs/architecture.md). A report or an activation
that lands on one replica behind a load-balanced Service therefore reaches
only that replica: the others' windows go cold, and an activation that lands
on a follower does nothing. So the activator talks to *every* replica.

``--scaler-url`` takes a comma-separated list of base URLs. Each URL's host
is resolved to all of its addresses (A and AAAA records, through the loop's
``getaddrinfo``), so a headless Service (``clusterIP: None``) whose name
resolves to one address per ready pod fans out to each pod. An IP literal is
used as it is. The resolution is refreshed every ``refresh_s`` (10 s) in the
background: callers get the addresses known now and never wait for DNS,
except the very first time. A failed resolution keeps the addresses last
known for that URL (a DNS hiccup must not silence the reports) and is
logged once per streak.

Each address becomes a :class:`Peer`: a base URL with the address in it, and
the original host, which the reporter sends as ``Host`` (and, for https, as
the TLS server name), so the replica sees the request it would have seen.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from yarl import URL

from activator.clock import Clock, loop_time

__all__ = ["Peer", "Resolver", "ScalerPeers", "parse_scaler_urls", "resolve_all"]

log = logging.getLogger(__name__)

Resolver = Callable[[str, int], Awaitable[list[str]]]

DEFAULT_REFRESH_S = 10.0


def parse_scaler_urls(value: str) -> tuple[str, ...]:
    """``"http://a:8090, http://b:8090"`` -> the URLs; a clear error for a bad one."""
    urls = tuple(part.strip().rstrip("/") for part in value.split(",") if part.strip())
    if not urls:
        raise ValueError("scaler_url: give at least one base URL such as http://tidal-scaler:8090")
    for url in urls:
        parsed = URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(
                f"scaler_url: {url!r} is not an http:// or https:// URL with a host; "
                "give a comma-separated list such as http://tidal-scaler.tidal-system:8090"
            )
    return urls


async def resolve_all(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6), in the resolver's order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]), None)
    return list(seen)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Peer:
    """One scaler replica: where to connect, and what to call it."""

    base: str  # http://10.0.0.5:8090/prefix
    host: str  # the URL's host, for Host and the TLS server name
    host_header: str  # host[:port] as the URL had it
    tls: bool
    label: str  # tidal-scaler.tidal-system:8090@10.0.0.5


def _peer(url: URL, address: str) -> Peer:
    assert url.host is not None
    port = url.port
    netloc = f"[{address}]" if ":" in address else address
    base = f"{url.scheme}://{netloc}:{port}{url.path.rstrip('/')}"
    host_header = url.host if url.is_default_port() else f"{url.host}:{port}"
    return Peer(
        base=base,
        host=url.host,
        host_header=host_header,
        tls=url.scheme == "https",
        label=f"{url.host}:{port}" + ("" if _is_ip(url.host) else f"@{address}"),
    )


class ScalerPeers:
    """The current peers of a list of scaler URLs, re-resolved every ``refresh_s``."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        refresh_s: float = DEFAULT_REFRESH_S,
        resolve: Resolver = resolve_all,
        clock: Clock = loop_time,
    ) -> None:
        if refresh_s <= 0:
            raise ValueError(f"refresh_s must be > 0, got {refresh_s}")
        self.urls = tuple(URL(u) for u in urls)
        self.refresh_s = refresh_s
        self._resolve = resolve
        self._clock = clock
        self._by_url: dict[URL, tuple[Peer, ...]] = {}
        self._failing: set[URL] = set()
        self._peers: tuple[Peer, ...] = ()
        self._resolved_at: float | None = None
        self._refreshing: asyncio.Task[None] | None = None

    @property
    def known(self) -> tuple[Peer, ...]:
        return self._peers

    @property
    def refreshing(self) -> bool:
        """A background re-resolution is under way."""
        return self._refreshing is not None

    async def current(self) -> tuple[Peer, ...]:
        """The peers known now; resolves first only if never resolved."""
        if self._resolved_at is None:
            await self.refresh()
        elif self._clock() - self._resolved_at >= self.refresh_s and self._refreshing is None:
            self._refreshing = asyncio.get_running_loop().create_task(
                self._background_refresh(), name="scaler peers refresh"
            )
        return self._peers

    async def _background_refresh(self) -> None:
        try:
            await self.refresh()
        finally:
            self._refreshing = None

    async def refresh(self) -> None:
        """Resolve every URL now; a URL that fails keeps its last known addresses."""
        results = await asyncio.gather(
            *(self._resolve_url(url) for url in self.urls), return_exceptions=True
        )
        for url, result in zip(self.urls, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                if url not in self._failing:
                    kept = len(self._by_url.get(url, ()))
                    log.warning(
                        "cannot resolve scaler %s (%r); keeping %d known address(es)",
                        url,
                        result,
                        kept,
                    )
                    self._failing.add(url)
                continue
            if url in self._failing:
                log.info("scaler %s resolves again: %s", url, ", ".join(p.base for p in result))
                self._failing.discard(url)
            elif self._by_url.get(url) != result and url in self._by_url:
                log.info("scaler %s now resolves to %s", url, ", ".join(p.base for p in result))
            self._by_url[url] = result
        seen: dict[str, Peer] = {}
        for url in self.urls:
            for peer in self._by_url.get(url, ()):
                seen.setdefault(peer.base, peer)
        self._peers = tuple(seen.values())
        self._resolved_at = self._clock()

    async def _resolve_url(self, url: URL) -> tuple[Peer, ...]:
        assert url.host is not None
        assert url.port is not None
        if _is_ip(url.host):
            return (_peer(url, url.host),)
        addresses = await self._resolve(url.host, url.port)
        if not addresses:
            raise OSError(f"{url.host} resolved to no address")
        return tuple(_peer(url, a) for a in addresses)

    async def close(self) -> None:
        task = self._refreshing
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
