"""Keep-alive connections to replicas, pooled by address: reuse, opening, idle sweep.

:class:`UpstreamPool` lends a connection to ``host:port``: an idle
keep-alive one when there is one (the most recently used: warm, and least
likely closed), else a new one, :class:`~activator.http1.upstream.NotSent`
when none opens. The caller gives it back (:meth:`UpstreamPool.release`),
and the pool keeps it only if it can carry another request.

New connections to one replica are opened at most ``max_opening`` at a
time, each counted until it delivers its first answer byte (proof that the
replica accepted it). A burst of held requests released at once would
otherwise overflow the replica's listen backlog (128 for aiohttp, 100 for
asyncio's default), and with SYN cookies the connections that did not fit
are reset after the request was written: a 502 for a request the replica
never saw. Reused connections need no such slot.

A request head with no body to pipe after it is not written at once but
when the event loop's turn has run its callbacks (:meth:`UpstreamPool.write_soon`):
the requests parsed in one turn go out back to back, so a replica is woken
once for them rather than once each.

Idle connections are closed after ``keepalive_s`` (4 s by default, below
uvicorn's (vLLM's) 5 s, so the proxy closes first and rarely reuses a
connection the replica is closing). A pooled connection the replica closed
is noticed (``connection_lost``) and dropped before reuse.
"""

from __future__ import annotations

import asyncio
from collections import deque

from activator.http1.upstream import NotSent, UpstreamConnection

__all__ = ["UpstreamPool"]


class UpstreamPool:
    """Keep-alive connections to replicas, by ``host:port``."""

    def __init__(
        self,
        *,
        connect_timeout_s: float = 5.0,
        keepalive_s: float = 4.0,
        max_connections: int = 0,
        max_opening: int = 64,
    ) -> None:
        if connect_timeout_s <= 0 or keepalive_s <= 0 or max_connections < 0 or max_opening < 1:
            raise ValueError(
                "connect_timeout_s and keepalive_s must be > 0, max_connections >= 0 and "
                f"max_opening >= 1, got {connect_timeout_s}, {keepalive_s}, {max_connections}, "
                f"{max_opening}"
            )
        self.max_opening = max_opening
        self._opening: dict[str, asyncio.Semaphore] = {}
        self._keys: dict[tuple[str, int], str] = {}
        self.loop = asyncio.get_running_loop()
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        # Per replica, its idle connections and since when each is idle, the
        # most recently used last.
        self._idle: dict[str, deque[tuple[UpstreamConnection, float]]] = {}
        self._limit = asyncio.Semaphore(max_connections) if max_connections else None
        self._open: set[UpstreamConnection] = set()
        self._sweeper: asyncio.TimerHandle | None = None
        self.opened = 0  # connections opened, ever (tests check reuse with it)
        # Request heads to write when the loop's callbacks of this turn are done.
        self._writes: dict[asyncio.Transport, bytes] = {}

    def write_soon(self, transport: asyncio.Transport, data: bytes) -> None:
        """Write ``data`` to ``transport`` once this turn of the event loop has run its callbacks.

        The requests parsed in one turn then go out back to back, as they did
        when a task per request wrote them: a replica woken by the first finds
        the next ones while it is still awake, rather than being woken for
        each (on loopback, waking the reader is the costliest part of a send).
        """
        writes = self._writes
        if not writes:
            self.loop.call_soon(self._flush)
        queued = writes.get(transport)
        writes[transport] = data if queued is None else queued + data

    def _flush(self) -> None:
        writes, self._writes = self._writes, {}
        for transport, data in writes.items():
            if not transport.is_closing():
                transport.write(data)

    async def acquire(self, host: str, port: int) -> UpstreamConnection:
        """An idle connection to ``host:port``, else a new one; :class:`NotSent` if none opens."""
        key = self._key(host, port)
        conn = self._take_idle(key)
        if conn is not None:
            return conn
        opening = self._opening.get(key)
        if opening is None:
            opening = self._opening[key] = asyncio.Semaphore(self.max_opening)
        await opening.acquire()
        conn = self._take_idle(key)  # one may have come back while we waited
        if conn is not None:
            opening.release()
            return conn
        try:
            conn = await self._connect(host, port, key)
        except BaseException:
            opening.release()
            raise
        conn.opening = opening
        return conn

    def _key(self, host: str, port: int) -> str:
        key = self._keys.get((host, port))
        if key is None:
            if len(self._keys) >= 4096:  # replicas come and go: keep the cache bounded
                self._keys.clear()
            key = self._keys[(host, port)] = f"{host}:{port}"
        return key

    def take_idle(self, host: str, port: int) -> UpstreamConnection | None:
        """An idle pooled connection to ``host:port`` ready for a request, if there is one."""
        key = self._keys.get((host, port))
        return self._take_idle(key if key is not None else self._key(host, port))

    def _take_idle(self, key: str) -> UpstreamConnection | None:
        idle = self._idle.get(key)
        now = self.loop.time()
        while idle:
            conn, since = idle.pop()  # the most recently used: warm, and least likely closed
            if conn.reusable and now - since < self.keepalive_s:
                return conn
            conn.abort()
        return None

    async def _connect(self, host: str, port: int, key: str) -> UpstreamConnection:
        if self._limit is not None:
            await self._limit.acquire()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await self.loop.create_connection(
                    lambda: UpstreamConnection(self, key), host, port
                )
        except (OSError, TimeoutError) as exc:
            if self._limit is not None:
                self._limit.release()
            raise NotSent(f"{key}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            if self._limit is not None:
                self._limit.release()
            raise
        self._open.add(conn)
        self.opened += 1
        return conn

    def release(self, conn: UpstreamConnection) -> None:
        """Back to the pool when it can carry another request, else closed."""
        if not conn.reusable:
            conn.abort()
            return
        idle = self._idle.get(conn.key)
        if idle is None:
            idle = self._idle[conn.key] = deque()
        idle.append((conn, self.loop.time()))
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(self.keepalive_s, self._sweep)

    def drop_idle(self, host: str, port: int) -> None:
        """Close the idle connections to ``host:port``: the replica may be closing them too.

        After a replica closed one connection unasked (shutting down, most
        often), the next request there opens a new one, which is refused at
        once if it is gone, rather than finding another closing one.
        """
        idle = self._idle.pop(self._key(host, port), None)
        while idle:
            idle.pop()[0].abort()

    def forget(self, conn: UpstreamConnection) -> None:
        """``conn`` closed: drop it from the pool and free its slot."""
        if conn in self._open:
            self._open.discard(conn)
            if self._limit is not None:
                self._limit.release()
        idle = self._idle.get(conn.key)
        if idle is not None:
            for entry in idle:
                if entry[0] is conn:
                    idle.remove(entry)
                    break

    def _sweep(self) -> None:
        """Close connections idle past ``keepalive_s``; run again while any are idle."""
        self._sweeper = None
        cutoff = self.loop.time() - self.keepalive_s
        for idle in self._idle.values():
            while idle and idle[0][1] <= cutoff:
                idle.popleft()[0].abort()
        if any(self._idle.values()):
            self._sweeper = self.loop.call_later(self.keepalive_s, self._sweep)

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._open):
            conn.abort()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports run their connection_lost
