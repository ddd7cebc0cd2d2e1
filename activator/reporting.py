"""Telling the scaler what this activator sees: stats every second, activations at once.

``POST /v1/stats`` (DESIGN §3) goes out every ``period_s`` with the bearer
token. For each known target it carries the time-weighted mean of
``in_flight + buffered`` over the period (from the gates' running integral,
divided by the period actually elapsed, so a late tick does not inflate it),
the counts at the end of the period, the arrivals, and in-flight per replica.
Every known target is listed, idle ones too: the scaler may take a model to
zero only when every activator reports zero for it. The scaler's answer
``{"activators": n}`` sets this activator's share of container-concurrency.

``POST /v1/activate`` goes out the moment a request is held for a target with
no ready replica (:meth:`Reporter.activate`, called synchronously by the
gate). One task per target repeats it with exponential backoff (0.5 s
doubling to 8 s) until a replica is ready, waking early when one is; a
second held request while that task runs costs nothing.

Failures to reach the scaler are logged (once per streak) and counted; they
never affect the request path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from activator.buffering import Gate
from activator.metrics import Metrics
from activator.registry import Registry

__all__ = ["ACTIVATE_BACKOFF_S", "Reporter", "build_report"]

log = logging.getLogger(__name__)

ACTIVATE_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)


def build_report(*, activator: str, registry: Registry, elapsed_s: float) -> dict[str, Any]:
    """The ``/v1/stats`` body for the period that just ended (resets the period)."""
    targets: dict[str, Any] = {}
    for name, gate in registry.gates.items():
        area, arrivals = gate.take_period()
        targets[name] = {
            "concurrency": round(area / elapsed_s, 4) if elapsed_s > 0 else 0.0,
            "in_flight": gate.in_flight,
            "buffered": gate.buffered,
            "arrivals": arrivals,
            "pods": gate.pods(),
        }
    return {"activator": activator, "period_s": round(elapsed_s, 4), "targets": targets}


class Reporter:
    """Posts stats every period and activations on demand."""

    def __init__(
        self,
        *,
        registry: Registry,
        session: aiohttp.ClientSession,
        scaler_url: str,
        token: str | None,
        activator: str,
        metrics: Metrics,
        period_s: float = 1.0,
        timeout_s: float = 2.0,
        backoff_s: tuple[float, ...] = ACTIVATE_BACKOFF_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.session = session
        self.base = scaler_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.activator = activator
        self.metrics = metrics
        self.period_s = period_s
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.backoff_s = backoff_s
        self.clock = clock
        self._activating: dict[str, asyncio.Task[None]] = {}
        self._failing = False

    async def run(self) -> None:
        """Report every period until cancelled."""
        last = self.clock()
        try:
            while True:
                await asyncio.sleep(self.period_s)
                now = self.clock()
                report = build_report(
                    activator=self.activator, registry=self.registry, elapsed_s=now - last
                )
                last = now
                await self._post_stats(report)
        finally:
            await self.close()

    async def _post_stats(self, report: dict[str, Any]) -> None:
        try:
            async with self.session.post(
                self.base + "/v1/stats", json=report, headers=self.headers, timeout=self.timeout
            ) as resp:
                if resp.status != 200:
                    raise aiohttp.ClientResponseError(
                        resp.request_info, (), status=resp.status, message=resp.reason or ""
                    )
                answer = await resp.json(content_type=None)
            count = answer.get("activators") if isinstance(answer, dict) else None
            if isinstance(count, int) and count > 0:
                self.registry.set_activators(count)
            self.metrics.reports.labels("ok").inc()
            if self._failing:
                log.info("stats reports reach the scaler again")
                self._failing = False
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            self.metrics.reports.labels("error").inc()
            if not self._failing:
                log.warning("cannot report stats to %s: %r", self.base, exc)
                self._failing = True

    def activate(self, gate: Gate) -> None:
        """A request is held for a cold target: tell the scaler now (idempotent)."""
        task = self._activating.get(gate.name)
        if task is not None and not task.done():
            return
        self._activating[gate.name] = asyncio.get_running_loop().create_task(
            self._activate_until_ready(gate), name=f"activate {gate.name}"
        )

    async def _activate_until_ready(self, gate: Gate) -> None:
        attempt = 0
        while not gate.endpoints.ready and not gate.closed:
            await self._post_activate(gate.name)
            delay = self.backoff_s[min(attempt, len(self.backoff_s) - 1)]
            attempt += 1
            if await gate.endpoints.wait_ready(delay):
                return

    async def _post_activate(self, target: str) -> None:
        body = {"activator": self.activator, "target": target}
        try:
            async with self.session.post(
                self.base + "/v1/activate", json=body, headers=self.headers, timeout=self.timeout
            ) as resp:
                ok = resp.status < 300
                await resp.read()
            self.metrics.activations.labels(target, "ok" if ok else "error").inc()
            if not ok:
                log.warning("scaler answered %s to /v1/activate for %s", resp.status, target)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.metrics.activations.labels(target, "error").inc()
            log.warning("cannot send /v1/activate for %s to %s: %r", target, self.base, exc)

    async def close(self) -> None:
        tasks = [t for t in self._activating.values() if not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._activating.clear()
