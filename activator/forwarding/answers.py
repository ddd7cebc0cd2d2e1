"""Every answer the activator makes itself, and the count of every request that ends.

:class:`Answers` is the one place for the status, the body,
``Retry-After``, whether the connection closes, and the metrics of an
answer of the activator's own (the status table is
:mod:`activator.statuses`), and the one place a request whose answer was
cut is counted (its reason: ``client_closed``, ``replica_failed``,
``shutdown``). Each kind of refusal and cut is logged once per target per
interval (:mod:`~activator.forwarding.refusal_log`), so a client looping on
a bad request cannot fill the disk.

Main decision: an answer already begun cannot become a status; the client
connection is cut instead, which tells the client the truth.
"""

from __future__ import annotations

import json
import logging
import time

from activator import http1
from activator.forwarding.refusal_log import RefusalLog
from activator.holding.gate import DrainEnded, HoldError, Shed
from activator.http1 import Exchange
from activator.metrics import Metrics
from activator.statuses import (
    AdapterLoadFailed,
    AllRefused,
    Draining,
    NoAdapter,
    NoTarget,
    ProxyError,
    UpstreamFailed,
    error_document,
    status_of,
)

__all__ = ["SERVE_ERRORS", "Answers"]

log = logging.getLogger(__name__)

# What a request's own answer is made of: each class one row of the status table.
SERVE_ERRORS = (
    ProxyError,
    HoldError,
    http1.BodyTooLarge,
    http1.BodyStalled,
    http1.RequestRejected,
)
# Failures whose text the client is told (it names the model, the replica, the refusal).
_DETAILED = (
    UpstreamFailed,
    AllRefused,
    NoTarget,
    NoAdapter,
    AdapterLoadFailed,
    http1.RequestRejected,
)
# Failures after which the connection closes: the drain, or a body not read to its end.
_CLOSING = (Draining, DrainEnded, http1.BodyStalled, http1.BodyTooLarge, http1.RequestRejected)


class Answers:
    """The activator's own answers, and the count of every request that ends: answered,
    relayed whole, or cut (:meth:`cut`)."""

    __slots__ = ("cuts", "metrics", "refusals", "retry_after_s")

    def __init__(self, metrics: Metrics, retry_after_s: int) -> None:
        self.metrics = metrics
        self.retry_after_s = retry_after_s
        self.refusals = RefusalLog()
        self.cuts = RefusalLog(verb="cut")

    def fail(self, exchange: Exchange, exc: Exception, target: str, started: float) -> None:
        """Answer ``exc`` by the status table, or cut an answer already begun; then count
        it, and log it (one line per kind and target per interval: :mod:`refusal_log`)."""
        spec = status_of(exc)
        self.metrics.reject(target, spec.code)
        error = error_document(exc, str(exc) if isinstance(exc, _DETAILED) else "")["error"]
        said = self.refusals.note(
            status=spec.status,
            # A shed says which rule fired, in its own line: each is a different fix.
            code=f"{spec.code} ({exc.cause})" if isinstance(exc, Shed) else spec.code,
            target=target,
            message=error["message"],
            now=time.monotonic(),
        )
        if said is not None:
            log.log(*said)
        if exchange.started:
            exchange.cut()  # part of an answer went out: it cannot become a status
        else:
            exchange.answer_error(
                spec.status,
                error_type=error["type"],
                code=error["code"],
                message=error["message"],
                retry_after_s=(getattr(exc, "retry_after_s", None) or self.retry_after_s)
                if spec.retry_after
                else None,
                close=isinstance(exc, _CLOSING),
            )
        self.metrics.observe(target, spec.status, time.perf_counter() - started)

    def cut(self, target: str, reason: str, detail: str) -> None:
        """Count a request whose answer was cut (``reason``: one of ``CUT_REASONS``),
        and log it (one line per reason and target per interval, as refusals are)."""
        self.metrics.count_cut(target, reason)
        said = self.cuts.note(
            status=0, code=reason, target=target, message=detail, now=time.monotonic()
        )
        if said is not None:
            # A replica failing mid-answer is the model's trouble; a client leaving is not.
            log.log(logging.WARNING if reason == "replica_failed" else said[0], said[1])

    def json(self, exchange: Exchange, document: object, target: str, started: float) -> None:
        """A 200 with a JSON body that the activator writes itself (the model list)."""
        self.own(
            exchange,
            (200, b"OK", b"application/json", json.dumps(document).encode()),
            target,
            started,
        )

    def own(
        self,
        exchange: Exchange,
        answer: tuple[int, bytes, bytes, bytes],
        target: str,
        started: float,
    ) -> None:
        """An answer the activator writes itself, not an error: ``(status, reason, content
        type, body)`` (a probe's: :mod:`activator.routing.server_probes`)."""
        exchange.answer(*answer)
        self.metrics.observe(target, answer[0], time.perf_counter() - started)
