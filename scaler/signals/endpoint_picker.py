"""The endpoint picker's view: an InferencePool's EPP ``/metrics``, as a demand source.

A target an ``InferencePool`` makes (docs/gateway-api.md) has an endpoint
picker (EPP; llm-d's router) in front of its replicas instead of Tidal's
activator. The EPP sees every request to the pool: those its flow control
holds (its queue, by priority band) and those it sent to a replica and
whose answer has not ended. This source reads its metrics
(:func:`~scaler.signals.epp_metrics.read_epp_metrics`, which names the
router's file and version for every series) and hands the hub what an
activator's report would say:

- **concurrency** = requests queued + running (dispatched, answer not
  ended): the activator's held + in flight; **queue depth** = requests
  queued (all priorities, all fairness flows): held before a replica, as
  the activator's buffered;
- **busy** while anything is queued or running (scale to zero waits for
  it, as for an activator's requests);
- **brought**: the requests that entered flow control since the last
  reading (those that left it, by any outcome, plus the change in the
  queue), for SLO-first sizing's request count; and the requests the EPP
  turned away for want of an endpoint (``EvictedNoEndpoints``,
  ``RejectedNoEndpoints``) as first tokens that missed any objective, so
  the attainment SLO-first scaling measures counts them as misses;
- **held for a wake**: requests queued while the pool has no ready
  endpoint. The service then asks the controller to wake the model at
  once, as an activator's ``/v1/activate`` does.

For people (``/v1/targets``, ``tidal status``, the ``observed_signal``
metric): queue size and bytes, per priority too; the mean time in the queue
of the requests dispatched and of those evicted, since the last reading;
effective saturation; ready endpoints; in-flight tokens; the mean TTFT the
EPP measured (from the request reaching it, so with its queue time), since
the last reading; and the misses since the scaler began reading.

Main decision, two cadences with a bounded cost. A full reading (every
family, ~13 ms of parsing for the router's ~330-line page) comes every
``interval_s`` (1 s, an activator's report period). In between, a pool
with no ready replica (as Tidal sees its pods, or as the EPP's last reading
said) is read every ``waiting_room_interval_s`` (250 ms) for its queue and
ready endpoints alone (the reader's fast path, about 1 ms), so that the
wake starts within ``waiting_room_interval_s`` plus one fetch of the first
queued request, well within a second; a pool that has replicas is not read
in between (its queue is a scaling signal, not a wake, and the full reading
follows it every second). The cost is one fetch and ~1 ms per cold pool
per 250 ms, and one fetch and ~13 ms per pool per second. A reading is fresh
while the last full one is younger than 1.5 intervals plus the timeout; a
picker that cannot be read is stale (it may raise the scale, never lower
it), never zero.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from pydantic import Field

from groundwork.token_file import read_token
from scaler.policy.api import SignalKind
from scaler.signals.base import COUNTS, Brought, PickerEndpoint, SourceReading, TargetPods
from scaler.signals.epp_metrics import (
    DISPATCHED,
    EVICTED_NO_ENDPOINTS,
    QUEUE_SIZE,
    READY_ENDPOINTS,
    REJECTED_NO_ENDPOINTS,
    EppMetricsError,
    EppPoolReading,
    read_epp_metrics,
)
from scaler.signals.registry import Polled, PolledSourceSettings, SourceContext

__all__ = ["ENDPOINT_PICKER", "EppSettings", "EppSource", "PickerError", "reading_of"]

log = logging.getLogger(__name__)

#: This source's name.
ENDPOINT_PICKER = "endpoint-picker"
#: The families of the waiting-room reading (the reader's fast path).
WAITING_ROOM = (QUEUE_SIZE, READY_ENDPOINTS)
#: The outcomes that mean "turned away for want of an endpoint": misses.
NO_ENDPOINT = (EVICTED_NO_ENDPOINTS, REJECTED_NO_ENDPOINTS)
#: The in-cluster ServiceAccount token, sent to an EPP that checks who reads its metrics.
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class PickerError(Exception):
    """An endpoint picker's metrics could not be fetched or read."""


class EppSettings(PolledSourceSettings):
    enabled: bool = Field(True, description="read InferencePools' endpoint pickers' /metrics")
    interval_s: float = Field(
        1.0, gt=0, description="time between full readings of each picker, seconds"
    )
    waiting_room_interval_s: float = Field(
        0.25,
        gt=0,
        description="time between readings of a picker whose pool has no ready replica "
        "(its queue only: the wake from zero), seconds",
    )
    timeout_s: float = Field(1.0, gt=0, description="timeout of one reading, seconds")
    token_file: Path | None = Field(
        None,
        description="bearer token sent to the pickers (unset: the pod's ServiceAccount token "
        "when there is one, else none); the router checks it by default",
    )
    max_concurrent: int = Field(16, ge=1, description="picker readings in flight at once")

    def build(self, context: SourceContext) -> Polled | None:
        if not self.enabled:
            return None
        token = self.token_file
        if token is None and SERVICE_ACCOUNT_TOKEN.is_file():
            token = SERVICE_ACCOUNT_TOKEN
        source = EppSource(
            session=context.session,
            interval_s=self.interval_s,
            timeout_s=self.timeout_s,
            token_file=token,
            max_concurrent=self.max_concurrent,
        )
        # Polled at the waiting room's pace; fresh by the full readings' (module docstring).
        fresh_within_s = 1.5 * self.interval_s + self.timeout_s
        return Polled(source, min(self.waiting_room_interval_s, self.interval_s), fresh_within_s)


@dataclass(slots=True)
class _Picker:
    """One pool's picker: its latest readings and what they brought."""

    endpoint: PickerEndpoint
    full: EppPoolReading | None = None
    full_at: float | None = None
    room: EppPoolReading | None = None  # the latest waiting-room reading
    room_at: float | None = None
    brought: Brought | None = None
    observed: dict[str, float] = field(default_factory=dict)
    misses: float = 0.0  # turned away for want of an endpoint, since first read
    error: str | None = None

    def latest_room(self) -> EppPoolReading | None:
        """The newest reading of the queue and ready endpoints (full or waiting room)."""
        if self.room is not None and (self.full_at is None or (self.room_at or 0) > self.full_at):
            return self.room
        return self.full


def _total_left(r: EppPoolReading) -> float:
    return sum(o.requests for o in r.outcomes)


def _mean_wait(before: EppPoolReading, after: EppPoolReading, outcome: str) -> float | None:
    """The mean time in the queue of the requests that left with ``outcome`` between
    two readings (``None``: none did)."""
    was = {o.outcome: o for o in before.outcomes}.get(outcome)
    now = {o.outcome: o for o in after.outcomes}.get(outcome)
    if now is None:
        return None
    count = now.requests - (was.requests if was else 0.0)
    seconds = now.seconds - (was.seconds if was else 0.0)
    return seconds / count if count > 0 and seconds >= 0 else None


def reading_of(
    before: EppPoolReading | None, after: EppPoolReading
) -> tuple[Brought | None, dict[str, float], float]:
    """What one full reading brought since ``before`` (``None``: the first reading, which
    brings nothing: its counters hold everything before the scaler looked), what it shows
    people, and the requests turned away for want of an endpoint since ``before``.

    A counter that went back means the picker restarted: nothing is counted new then."""
    observed: dict[str, float] = {
        "epp_queued_requests": after.queued_requests,
        "epp_queued_bytes": after.queued_bytes,
    }
    for band in after.queued:
        observed[f"epp_queued_requests_priority_{band.priority}"] = band.requests
    for name, value in (
        ("epp_running_requests", after.running_requests),
        ("epp_ready_endpoints", after.ready_endpoints),
        ("epp_saturation", after.saturation),
        ("epp_inflight_tokens", after.inflight_tokens),
    ):
        if value is not None:
            observed[name] = value
    if before is None:
        return None, observed, 0.0
    for outcome, name in ((DISPATCHED, "dispatched"), (EVICTED_NO_ENDPOINTS, "evicted")):
        wait = _mean_wait(before, after, outcome)
        if wait is not None:
            observed[f"epp_queue_wait_{name}_s"] = wait
    if after.ttft is not None:
        # A labelled histogram has no series before its first observation.
        count, total = (before.ttft.count, before.ttft.sum_s) if before.ttft else (0.0, 0.0)
        firsts = after.ttft.count - count
        if firsts > 0 and after.ttft.sum_s >= total:
            observed["epp_ttft_mean_s"] = (after.ttft.sum_s - total) / firsts
    left = _total_left(after) - _total_left(before)
    misses = sum(after.left(o) - before.left(o) for o in NO_ENDPOINT)
    if left < 0 or misses < 0:  # the picker restarted
        return None, observed, 0.0
    entered = max(0.0, left + after.queued_requests - before.queued_requests)
    if entered <= 0 and misses <= 0:
        return None, observed, 0.0
    # A miss is a request whose first token never came: past any objective.
    ttft = ((float("inf"), misses),) if misses > 0 else ()
    return Brought(arrivals=entered, ttft_new=ttft), observed, misses


class EppSource:
    """Reads the endpoint pickers of InferencePool targets (module docstring)."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        interval_s: float = 1.0,
        timeout_s: float = 1.0,
        token_file: Path | None = None,
        max_concurrent: int = 16,
        max_body_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        if interval_s <= 0 or timeout_s <= 0 or max_concurrent < 1:
            raise ValueError(
                "interval_s and timeout_s must be > 0 and max_concurrent >= 1, got "
                f"{interval_s}, {timeout_s}, {max_concurrent}"
            )
        self._session = session
        self._interval_s = interval_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._stale_after_s = 1.5 * interval_s + timeout_s
        self._token_file = token_file
        self._limit = asyncio.Semaphore(max_concurrent)
        self._max_body_bytes = max_body_bytes
        self._pickers: dict[str, _Picker] = {}

    @property
    def name(self) -> str:
        return ENDPOINT_PICKER

    @property
    def feeds(self) -> frozenset[SignalKind]:
        """Requests queued and running: concurrency and queue depth."""
        return COUNTS

    def _headers(self) -> dict[str, str]:
        if self._token_file is None:
            return {}
        try:
            # Read each time: a projected ServiceAccount token is rotated in place.
            return {"Authorization": f"Bearer {read_token(self._token_file, setting='token')}"}
        except ValueError as exc:
            raise PickerError(str(exc)) from None

    async def _fetch(self, url: str) -> str:
        async with self._limit:
            try:
                async with self._session.get(
                    url, timeout=self._timeout, headers=self._headers()
                ) as resp:
                    if resp.status != 200:
                        raise PickerError(f"GET {url}: HTTP {resp.status}")
                    body = await resp.content.read(self._max_body_bytes + 1)
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise PickerError(f"GET {url}: {type(exc).__name__}: {exc}") from exc
        if len(body) > self._max_body_bytes:
            raise PickerError(f"GET {url}: body over {self._max_body_bytes} bytes")
        return body.decode("utf-8", "replace")

    async def _read(self, picker: _Picker, *, full: bool, now: float) -> None:
        url, pool = picker.endpoint.metrics_url, picker.endpoint.pool
        try:
            text = await self._fetch(url)
            if full:
                got = read_epp_metrics(text, pool=pool)
            else:
                got = read_epp_metrics(text, pool=pool, families=WAITING_ROOM)
        except (PickerError, EppMetricsError) as exc:
            if picker.error != str(exc):
                log.info("reading the endpoint picker of pool %s failed: %s", pool, exc)
            picker.error = str(exc)
            return
        picker.error = None
        if not full:
            picker.room, picker.room_at = got, now
            return
        brought, observed, misses = reading_of(picker.full, got)
        picker.brought, picker.misses = brought, picker.misses + misses
        picker.observed = {**observed, "epp_no_endpoint_misses": picker.misses}
        if got.legacy and picker.full is None:
            log.info("pool %s: its picker writes older names for %s", pool, sorted(got.legacy))
        picker.full, picker.full_at = got, now

    def _cold(self, picker: _Picker, target: TargetPods) -> bool:
        """Whether the pool has no ready replica, as Tidal or the picker last saw it."""
        room = picker.latest_room()
        return not target.pods or (room is not None and not room.ready_endpoints)

    async def refresh(self, targets: Sequence[TargetPods], *, now: float) -> None:
        jobs = []
        kept: dict[str, _Picker] = {}
        for target in targets:
            if target.picker is None:
                continue
            picker = self._pickers.get(target.key)
            if picker is None or picker.endpoint != target.picker:
                picker = _Picker(target.picker)
            kept[target.key] = picker
            # A little early rather than a poll late: the polls come every 250 ms.
            due = picker.full_at is None or now - picker.full_at >= 0.9 * self._interval_s
            if due or self._cold(picker, target):
                jobs.append(self._read(picker, full=due, now=now))
        self._pickers = kept  # pools no longer listed are forgotten
        await asyncio.gather(*jobs)

    def read(self, key: str, *, now: float) -> SourceReading | None:
        picker = self._pickers.get(key)
        if picker is None:
            return None  # not a pool target, or its pool names no picker
        full, room = picker.full, picker.latest_room()
        if full is None or room is None or picker.full_at is None:
            return SourceReading(fresh=False, reporters=0)  # never read: unknown, not idle
        queued = room.queued_requests
        running = full.running_requests
        if running is None:
            running = full.inflight_requests or 0.0
        held = queued if not room.ready_endpoints else 0.0
        signals = {SignalKind.CONCURRENCY: queued + running, SignalKind.QUEUE_DEPTH: queued}
        return SourceReading(
            fresh=now - picker.full_at <= self._stale_after_s,
            reporters=1,
            signals=signals,
            busy=queued > 0 or running > 0,
            held_for_wake=held,
            brought=picker.brought,
            observed={**picker.observed, "epp_queued_requests": queued},
        )
