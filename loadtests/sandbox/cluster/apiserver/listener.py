"""The API server's listener: HTTPS on its address, which a fault may close for a while.

The listener is opened on the server's host and port (port 0: one the
system picks, kept from then on, so a listener opened again serves where the
kubeconfigs point). While it is closed new connections are refused; when
and why it opens again is the faults' (:mod:`.fault_control`).
"""

from __future__ import annotations

from aiohttp import web

from loadtests.sandbox.cluster.certs import ServingCertificates

__all__ = ["Listener"]


class Listener:
    """The server's TCP site over its runner."""

    def __init__(
        self, runner: web.AppRunner, certs: ServingCertificates, *, host: str, port: int
    ) -> None:
        self._runner = runner
        self._certs = certs
        self._host = host
        self.port = port
        self._site: web.TCPSite | None = None

    @property
    def is_open(self) -> bool:
        return self._site is not None

    async def open(self) -> None:
        self._site = web.TCPSite(
            self._runner,
            self._host,
            self.port,
            ssl_context=self._certs.server_context(),
            reuse_address=True,
            backlog=1024,
        )
        await self._site.start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])

    async def close(self) -> None:
        """Refuse new connections until :meth:`open`."""
        if self._site is not None:
            await self._site.stop()
            self._site = None
