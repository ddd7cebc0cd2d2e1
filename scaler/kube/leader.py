"""One writer: leader election on the Lease ``tidal-scaler`` (coordination.k8s.io/v1).

Every scaler replica runs this loop every ``retry_period_s``. It reads the
Lease; if nobody holds it, or the holder has not renewed it for
``lease_duration_s`` *as measured on our own monotonic clock since we first
saw that version of the Lease*, it takes it with an update that carries the
read ``resourceVersion`` (two candidates racing get one 200 and one 409). The
holder renews the same way.

Main decision, clocks: like client-go, expiry is judged from when *we*
observed the Lease change, never from ``renewTime`` written by another
machine whose clock may be off. And a leader counts itself leader only while
its last successful renewal is younger than ``renew_deadline_s`` (which must
be below the lease duration), so a leader cut off from the API server stops
writing before anyone else may take over. Failover after a leader dies takes
at most ``lease_duration_s + retry_period_s``: the Lease looks unchanged for
the lease duration, then the next attempt takes it. On a clean shutdown the
leader releases the Lease (empty holder) so a successor need not wait.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from groundwork.kube.errors import Conflict, KubeError, NotFound, translate

__all__ = ["LeaseElector"]

log = logging.getLogger(__name__)

_CALL_ERRORS = (ApiException, aiohttp.ClientError, OSError, TimeoutError)


def _micro_time(now: dt.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """A :class:`~scaler.kube.types.LeaderElector` on a coordination.k8s.io/v1 Lease."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        namespace: str,
        identity: str,
        name: str = "tidal-scaler",
        lease_duration_s: float = 15.0,
        renew_deadline_s: float = 10.0,
        retry_period_s: float = 2.0,
        request_timeout_s: float = 5.0,
        clock: Callable[[], float] | None = None,
        on_elected: Callable[[], None] | None = None,
    ) -> None:
        if not 0 < retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError(
                "leader election needs 0 < retry_period_s < renew_deadline_s < lease_duration_s, "
                f"got {retry_period_s}, {renew_deadline_s}, {lease_duration_s}"
            )
        self._coord: Any = client.CoordinationV1Api(api)
        self._namespace = namespace
        self._name = name
        self._identity = identity
        self._lease_duration_s = lease_duration_s
        self._renew_deadline_s = renew_deadline_s
        self._retry_period_s = retry_period_s
        self._timeout_s = min(request_timeout_s, renew_deadline_s / 2)
        self._clock = clock
        self._observed_rv: str | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # our clock, last successful acquire/renew
        self._on_elected = on_elected

    @property
    def identity(self) -> str:
        return self._identity

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    @property
    def is_leader(self) -> bool:
        return self._renewed_at is not None and (
            self._now() - self._renewed_at < self._renew_deadline_s
        )

    def _body(self, *, rv: str | None, acquire: str, transitions: int) -> dict[str, Any]:
        now = _micro_time(dt.datetime.now(dt.UTC))
        metadata: dict[str, Any] = {"name": self._name, "namespace": self._namespace}
        if rv is not None:
            metadata["resourceVersion"] = rv
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self._identity,
                "leaseDurationSeconds": max(1, round(self._lease_duration_s)),
                "acquireTime": acquire,
                "renewTime": now,
                "leaseTransitions": transitions,
            },
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when we hold the Lease afterwards."""
        was_leader = self.is_leader
        held = await self._attempt()
        if held and not was_leader and self._on_elected is not None:
            self._on_elected()
        return held

    async def _attempt(self) -> bool:
        started = self._now()
        doing = f"lease {self._namespace}/{self._name}"
        try:
            lease: Any = await self._coord.read_namespaced_lease(
                self._name, self._namespace, _request_timeout=self._timeout_s
            )
        except _CALL_ERRORS as exc:
            err = translate(exc, doing=f"read {doing}")
            if not isinstance(err, NotFound):
                raise err from exc
            lease = None
        if lease is None:
            body = self._body(rv=None, acquire=_micro_time(dt.datetime.now(dt.UTC)), transitions=0)
            try:
                await self._coord.create_namespaced_lease(
                    self._namespace, body, _request_timeout=self._timeout_s
                )
            except _CALL_ERRORS as exc:
                err = translate(exc, doing=f"create {doing}")
                if isinstance(err, Conflict) or err.status == 409:
                    return False  # another candidate created it first
                raise err from exc
            self._renewed_at = started
            return True

        spec = lease.spec
        rv = str(lease.metadata.resource_version)
        holder = (spec.holder_identity or "") if spec is not None else ""
        if rv != self._observed_rv:
            self._observed_rv = rv
            self._observed_at = started
        mine = holder == self._identity
        expired = started - self._observed_at >= self._lease_duration_s
        if holder and not mine and not expired:
            self._renewed_at = None
            return False
        transitions = int((spec.lease_transitions if spec is not None else 0) or 0)
        if mine and spec is not None and spec.acquire_time is not None:
            acquire = _micro_time(spec.acquire_time.astimezone(dt.UTC))
        else:
            acquire = _micro_time(dt.datetime.now(dt.UTC))
            transitions += 1
        try:
            await self._coord.replace_namespaced_lease(
                self._name,
                self._namespace,
                self._body(rv=rv, acquire=acquire, transitions=transitions),
                _request_timeout=self._timeout_s,
            )
        except _CALL_ERRORS as exc:
            err = translate(exc, doing=f"update {doing}")
            if isinstance(err, Conflict):
                return False
            raise err from exc
        if not mine:
            log.info("%s took the lease %s from %r", self._identity, doing, holder or None)
        self._renewed_at = started
        return True

    async def run(self) -> None:
        """Campaign and renew until cancelled; release the Lease when cancelled while leading."""
        try:
            while True:
                try:
                    await self.try_acquire_or_renew()
                except KubeError as exc:
                    log.warning("leader election: %s", exc)
                await asyncio.sleep(self._retry_period_s)
        finally:
            if self._renewed_at is not None and self.is_leader:
                await asyncio.shield(self._release())

    async def _release(self) -> None:
        """Give the Lease up (empty holder) so that a successor need not wait it out."""
        self._renewed_at = None
        try:
            lease: Any = await self._coord.read_namespaced_lease(
                self._name, self._namespace, _request_timeout=self._timeout_s
            )
            if lease.spec is None or lease.spec.holder_identity != self._identity:
                return
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self._name,
                    "namespace": self._namespace,
                    "resourceVersion": lease.metadata.resource_version,
                },
                "spec": {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "leaseTransitions": lease.spec.lease_transitions or 0,
                },
            }
            await self._coord.replace_namespaced_lease(
                self._name, self._namespace, body, _request_timeout=self._timeout_s
            )
        except _CALL_ERRORS as exc:
            log.info("could not release the lease: %s", exc)
