"""Our own small error tree for Kubernetes calls.

::

    KubeError                 anything that went wrong talking to the API
    ├── NotFound              404: the object (or the Deployment's /scale) is gone
    ├── Conflict              409: our resourceVersion is old; re-read and retry
    ├── Gone                  410: a watch's resourceVersion is too old; re-list
    ├── Rejected              other 4xx: the request itself is wrong (RBAC, schema)
    └── ApiUnavailable        no answer, 5xx, 429, timeouts: try again later

Callers outside the kube packages catch these, never kubernetes_asyncio's or
aiohttp's exceptions: the controller treats ``ApiUnavailable`` as "keep
deciding, act later", which is how an API server outage neither crashes the
scaler nor scales anything. Every translation keeps the original exception
as ``__cause__`` (``raise ... from``).
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = [
    "ApiUnavailable",
    "Conflict",
    "Gone",
    "KubeError",
    "NotFound",
    "Rejected",
    "error_for_status",
    "translate",
]


class KubeError(Exception):
    """A Kubernetes API call failed."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


class Gone(KubeError):
    pass


class Rejected(KubeError):
    pass


class ApiUnavailable(KubeError):
    pass


def _status_message(body: object) -> str:
    """The ``message`` of a Kubernetes ``Status`` body, else the body itself (cut short)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            parsed = json.loads(body)
        except ValueError:
            return body[:300]
        if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
            return str(parsed["message"])
        return body[:300]
    return ""


def error_for_status(status: int, message: str) -> KubeError:
    """The error for an HTTP status (no cause attached; the caller raises it)."""
    if status == 404:
        return NotFound(message, status=status)
    if status == 409:
        return Conflict(message, status=status)
    if status == 410:
        return Gone(message, status=status)
    if status == 429 or status >= 500 or status == 0:
        return ApiUnavailable(message, status=status)
    return Rejected(message, status=status)


def translate(exc: BaseException, *, doing: str) -> KubeError:
    """Our error for ``exc``, raised by a call described by ``doing``.

    Use as ``raise translate(exc, doing="patch scale of ns/name") from exc``.
    """
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        detail = _status_message(exc.body) or str(exc.reason or "")
        return error_for_status(status, f"{doing}: HTTP {status}: {detail}")
    if isinstance(exc, aiohttp.ClientError | TimeoutError | asyncio.TimeoutError | OSError):
        return ApiUnavailable(f"{doing}: {type(exc).__name__}: {exc}")
    return KubeError(f"{doing}: {type(exc).__name__}: {exc}")
