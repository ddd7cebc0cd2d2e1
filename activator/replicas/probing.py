"""Direct probes of endpoints: find a cold replica the moment it starts listening.

Every ``interval_s`` (200 ms, as Knative's activator) the prober tries a TCP
connection to each endpoint that is not ready: one the source lists but does
not call ready yet, or one that refused a request. A successful connect puts
it into rotation at once (held requests go out in the same loop turn); a
failure keeps it out. Draining endpoints are never probed: they are going
away, and a successful connect must not put them back.

With the routes file there is no watch to say that a replica died, so ready
endpoints are probed too, every ``recheck_ready_s``: a listed endpoint is
ready only while it accepts connections. With Kubernetes the EndpointSlice
watch does that job and ``recheck_ready_s`` is None.

A TCP connect is what "listening" means for the fake servers and for vLLM
(which binds its port only once the model is loaded). Probes of one round run
concurrently, each bounded by ``timeout_s``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from activator.clock import Clock, loop_time
from activator.replicas.readiness import EndpointTracker

__all__ = ["Prober", "tcp_probe"]


class _Closing(asyncio.Protocol):
    pass


async def tcp_probe(host: str, port: int, timeout_s: float) -> bool:
    """True when a TCP connection to host:port opens within ``timeout_s``."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout_s):
            transport, _ = await loop.create_connection(_Closing, host, port)
    except (OSError, TimeoutError):
        return False
    transport.close()
    return True


ProbeFn = Callable[[str, int, float], Awaitable[bool]]


class Prober:
    """Probes every target's endpoints in the background.

    ``endpoints`` lists every endpoint with its target's name when asked, and
    ``probed`` takes each result (the registry's, in the activator): the
    prober knows endpoints, not how targets are kept, and writes nothing of
    theirs itself.
    """

    def __init__(
        self,
        endpoints: Callable[[], Iterable[tuple[str, EndpointTracker]]],
        probed: Callable[[str, str, bool], None],
        *,
        interval_s: float = 0.2,
        timeout_s: float = 0.5,
        recheck_ready_s: float | None = None,
        probe: ProbeFn = tcp_probe,
        clock: Clock = loop_time,
    ) -> None:
        self.endpoints = endpoints
        self.probed = probed
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.recheck_ready_s = recheck_ready_s
        self.probe = probe
        self.clock = clock
        self._last_recheck: float | None = None
        self.rounds = 0

    async def run(self) -> None:
        while True:
            await self.probe_once()
            await asyncio.sleep(self.interval_s)

    async def probe_once(self) -> None:
        now = self.clock()
        recheck = self.recheck_ready_s is not None and (
            self._last_recheck is None or now - self._last_recheck >= self.recheck_ready_s
        )
        if recheck:
            self._last_recheck = now
        jobs: list[Awaitable[None]] = []
        for name, tracker in list(self.endpoints()):
            if tracker.draining:
                continue  # going away: no probe may put it back
            if recheck or not tracker.ready:
                jobs.append(self._probe(name, tracker))
        if jobs:
            await asyncio.gather(*jobs)
        self.rounds += 1

    async def _probe(self, name: str, tracker: EndpointTracker) -> None:
        ok = await self.probe(tracker.host, tracker.port, self.timeout_s)
        self.probed(name, tracker.key, ok)
