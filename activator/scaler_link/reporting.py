"""Telling the scaler what this activator sees: stats every second, activations at once.

``POST /v1/stats`` (docs/architecture.md) goes out every ``period_s`` with the bearer
token. For each known target it carries the time-weighted mean of
``in_flight + buffered`` over the period (from each target's running integral,
divided by the period actually elapsed, so a late tick does not inflate it),
the counts at the end of the period, the arrivals, and in-flight per replica;
for a target with a TTFT objective also the estimated prompt tokens and the
``max_tokens`` of the period's arrivals (:mod:`activator.holding.token_tally`); where
priority classes are in use (anything held outside ``standard``, or anything
shed in the period), the requests held by class and those shed, for
``tidal status``.
Every known target is listed, idle ones too: the scaler may take a model to
zero only when every activator reports zero for it. The scaler's answer
``{"activators": n}`` sets this activator's share of container-concurrency.

``POST /v1/activate`` goes out the moment a request is held for a target with
no ready replica: the gate puts the target on the
:class:`~activator.scaler_link.wake_queue.WakeQueue` and the reporter, which consumes
that queue in its own task, calls :meth:`Reporter.activate`. One task per
target repeats the post with exponential backoff (0.5 s doubling to 8 s)
until a replica is ready, waking early when one is; a second held request
while that task runs costs nothing. A replica that refuses to wake the
target (its annotations are invalid: :mod:`activator.scaler_link.wake_refusal`) ends
the task, and the requests held for the target are answered with its
reason.

Every scaler replica gets every report and every activation
(:mod:`activator.scaler_link.peers` finds them): each replica keeps its windows
warm, and only the leader acts, so an activation that reached only a
follower would wake nothing. Posts to different replicas run concurrently
and each replica has its own backoff: a dead or hanging replica costs the
others nothing (a stats post still in flight to it when the next period
ends is not doubled; that replica skips a report). With several replicas
the activator count is the largest fresh answer among them (a replica that
has just started may not have heard from every activator yet).

The warm tier: the leading scaler's answers (``"leader": true``) also list
the endpoints that sleep, per target (``"sleeping"``); the registry takes them
out of rotation (:meth:`Registry.set_sleeping`). Followers' answers carry no
such list and change nothing. An activation's answer comes once the leader
has woken a replica, so a held request goes out as soon as it arrives.

Failures to reach the scaler are logged (once per streak and replica) and
counted; they never affect the request path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

import aiohttp

from activator.clock import Clock, loop_time
from activator.holding.target import Period
from activator.metrics import Metrics
from activator.routing.registry import Registry
from activator.scaler_link.peers import Peer, ScalerPeers
from activator.scaler_link.wake_queue import WakeQueue
from activator.scaler_link.wake_refusal import NotWoken, refusal
from groundwork.rules.stats_report import ActivatorReport, TargetStats, report_json

__all__ = ["ACTIVATE_BACKOFF_S", "STATS_BACKOFF_PERIODS", "Reporter", "build_report"]

log = logging.getLogger(__name__)

ACTIVATE_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
# After n failed stats posts in a row a replica is skipped for this many periods.
STATS_BACKOFF_PERIODS = (1, 2, 4, 8)
# An activator count answered longer ago than this many periods is forgotten.
ANSWER_FRESH_PERIODS = 3


def build_report(*, activator: str, registry: Registry, elapsed_s: float) -> dict[str, Any]:
    """The ``/v1/stats`` body for the period that just ended (resets the period); its
    schema is :mod:`groundwork.rules.stats_report`, which the scaler reads it with."""
    targets = {
        name: _target_stats(period, elapsed_s) for name, period in registry.take_periods().items()
    }
    report = ActivatorReport(activator=activator, period_s=round(elapsed_s, 4), targets=targets)
    return report_json(report)


def _target_stats(period: Period, elapsed_s: float) -> TargetStats:
    """One target's part of the report."""
    prompt, output, over = period.tokens if period.tokens is not None else (0, 0, [])
    # By priority class, only where classes are in use (else as before).
    held = period.held_by_class
    classes = bool(period.shed or held["critical"] or held["sheddable"])
    return TargetStats(
        concurrency=round(period.area / elapsed_s, 4) if elapsed_s > 0 else 0.0,
        in_flight=period.in_flight,
        buffered=period.buffered,
        arrivals=period.arrivals,
        pods=period.pods,
        prompt_tokens=prompt,
        output_tokens=output,
        prompts_over=tuple(over),
        held_critical=held["critical"] if classes else 0,
        held_standard=held["standard"] if classes else 0,
        held_sheddable=held["sheddable"] if classes else 0,
        shed=period.shed,
        adapter_refusals=tuple(period.adapter_refusals),
    )


@dataclass(slots=True)
class _PeerState:
    """One scaler replica as the stats loop sees it."""

    failures: int = 0
    retry_at: float = 0.0
    posting: asyncio.Task[None] | None = None
    activators: int | None = None
    answered_at: float = 0.0


class Reporter:
    """Posts stats every period and activations on demand, to every scaler replica."""

    def __init__(
        self,
        *,
        registry: Registry,
        session: aiohttp.ClientSession,
        peers: ScalerPeers,
        token: str | None,
        activator: str,
        metrics: Metrics,
        period_s: float = 1.0,
        timeout_s: float = 2.0,
        backoff_s: tuple[float, ...] = ACTIVATE_BACKOFF_S,
        clock: Clock = loop_time,
        wake: WakeQueue | None = None,
    ) -> None:
        self.registry = registry
        self.session = session
        self.peers = peers
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.activator = activator
        self.metrics = metrics
        self.period_s = period_s
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.backoff_s = backoff_s
        self.clock = clock
        self.wake = wake
        self._activating: dict[str, asyncio.Task[None]] = {}
        self._state: dict[str, _PeerState] = {}
        self._failing_activate: set[str] = set()

    async def run(self) -> None:
        """Report every period, and wake targets as the gates ask, until cancelled."""
        last = self.clock()
        waking: asyncio.Task[None] | None = None
        if self.wake is not None:
            waking = asyncio.get_running_loop().create_task(
                self._wake_targets(self.wake), name="wake targets"
            )
        try:
            # Resolve the replicas now, so the first activation need not wait for DNS.
            await self.peers.current()
            while True:
                await asyncio.sleep(self.period_s)
                now = self.clock()
                report = build_report(
                    activator=self.activator, registry=self.registry, elapsed_s=now - last
                )
                last = now
                await self.send_stats(report, now=now)
        finally:
            if waking is not None:
                waking.cancel()
                await asyncio.gather(waking, return_exceptions=True)
            await self.close()

    async def _wake_targets(self, wake: WakeQueue) -> None:
        """Consume the gates' wake events: each starts (or joins) that target's activation."""
        while True:
            self.activate(await wake.get())

    async def send_stats(self, report: dict[str, Any], *, now: float) -> None:
        """Start one post of ``report`` to each replica that is neither busy nor backing off."""
        body = json.dumps(report).encode()
        loop = asyncio.get_running_loop()
        for peer in await self.peers.current():
            state = self._state.setdefault(peer.base, _PeerState())
            if state.posting is not None or now < state.retry_at:
                continue
            state.posting = loop.create_task(
                self._post_stats(peer, state, body), name=f"stats to {peer.label}"
            )

    def _request_kwargs(self, peer: Peer) -> dict[str, Any]:
        headers = {**self.headers, "Host": peer.host_header, "Content-Type": "application/json"}
        kwargs: dict[str, Any] = {"headers": headers, "timeout": self.timeout}
        if peer.tls:
            kwargs["server_hostname"] = peer.host
        return kwargs

    async def _post_stats(self, peer: Peer, state: _PeerState, body: bytes) -> None:
        try:
            async with self.session.post(
                peer.base + "/v1/stats", data=body, **self._request_kwargs(peer)
            ) as resp:
                if resp.status != 200:
                    raise aiohttp.ClientResponseError(
                        resp.request_info, (), status=resp.status, message=resp.reason or ""
                    )
                answer = await resp.json(content_type=None)
            count = answer.get("activators") if isinstance(answer, dict) else None
            self._take_sleeping(answer)
            now = self.clock()
            if isinstance(count, int) and count > 0:
                state.activators = count
                state.answered_at = now
                self._update_activators(now)
            self.metrics.reports.labels("ok").inc()
            if state.failures:
                log.info("stats reports reach scaler %s again", peer.label)
            state.failures = 0
            state.retry_at = 0.0
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            self.metrics.reports.labels("error").inc()
            if not state.failures:
                log.warning("cannot report stats to scaler %s: %r", peer.label, exc)
            periods = STATS_BACKOFF_PERIODS[min(state.failures, len(STATS_BACKOFF_PERIODS) - 1)]
            state.failures += 1
            state.retry_at = self.clock() + periods * self.period_s
        finally:
            state.posting = None

    def _take_sleeping(self, answer: Any) -> None:
        """The leader's list of sleeping endpoints, when this answer is the leader's."""
        if not isinstance(answer, dict) or answer.get("leader") is not True:
            return
        sleeping = answer.get("sleeping")
        if not isinstance(sleeping, dict):
            return
        self.registry.set_sleeping(
            {
                str(target): [str(e) for e in endpoints]
                for target, endpoints in sleeping.items()
                if isinstance(endpoints, list)
            }
        )

    def _update_activators(self, now: float) -> None:
        fresh_after = now - ANSWER_FRESH_PERIODS * self.period_s
        counts = [
            s.activators
            for s in self._state.values()
            if s.activators is not None and s.answered_at >= fresh_after
        ]
        if counts:
            self.registry.set_activators(max(counts))

    def activate(self, name: str) -> None:
        """A request is held for a cold target: tell every scaler replica now (idempotent)."""
        task = self._activating.get(name)
        if task is not None and not task.done():
            return
        self._activating[name] = asyncio.get_running_loop().create_task(
            self._activate_until_ready(name), name=f"activate {name}"
        )

    async def _activate_until_ready(self, name: str) -> None:
        peers = await self.peers.current()
        try:
            async with asyncio.TaskGroup() as group:
                for peer in peers:
                    group.create_task(self._activate_peer(name, peer))
        except* NotWoken as refused:
            # Tidal will not wake it: the held requests get the scaler's reason now.
            reason = refused.exceptions[0]
            assert isinstance(reason, NotWoken)  # a TaskGroup's group holds no group
            failed = self.registry.refuse(name, reason)
            log.warning("answered %d held request(s) for %s: %s", failed, name, reason)

    async def _activate_peer(self, name: str, peer: Peer) -> None:
        """Repeat /v1/activate to one replica, with its own backoff, until a replica is
        ready; raises :class:`NotWoken` when the replica refuses to wake the target."""
        attempt = 0
        registry = self.registry
        while registry.waking(name):
            refused = await self._post_activate(peer, name)
            if refused is not None:
                raise NotWoken(refused)
            delay = self.backoff_s[min(attempt, len(self.backoff_s) - 1)]
            attempt += 1
            if await registry.wait_ready(name, delay):
                return

    async def _post_activate(self, peer: Peer, target: str) -> str | None:
        """One activation to one replica; the replica's reason when it refuses to wake."""
        body = json.dumps({"activator": self.activator, "target": target}).encode()
        try:
            async with self.session.post(
                peer.base + "/v1/activate", data=body, **self._request_kwargs(peer)
            ) as resp:
                ok = resp.status < 300
                raw = await resp.read()
            if ok:
                with contextlib.suppress(ValueError):
                    self._take_sleeping(json.loads(raw))
            refused = None if ok else refusal(resp.status, raw)
            result = "ok" if ok else "refused" if refused is not None else "error"
            self.metrics.activations.labels(target, result).inc()
            if refused is not None:
                return refused
            if not ok:
                log.warning(
                    "scaler %s answered %s to /v1/activate for %s", peer.label, resp.status, target
                )
            elif peer.base in self._failing_activate:
                self._failing_activate.discard(peer.base)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.metrics.activations.labels(target, "error").inc()
            if peer.base not in self._failing_activate:
                self._failing_activate.add(peer.base)
                log.warning(
                    "cannot send /v1/activate for %s to scaler %s: %r", target, peer.label, exc
                )
        return None

    async def close(self) -> None:
        tasks = [t for t in self._activating.values() if not t.done()]
        tasks += [s.posting for s in self._state.values() if s.posting is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._activating.clear()
        await self.peers.close()
