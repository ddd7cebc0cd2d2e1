"""The calls the warm tier makes to a replica, and their one error.

vLLM serves its sleep mode on development endpoints (``VLLM_SERVER_DEV_MODE=1``
and ``--enable-sleep-mode``): ``POST /sleep?level=N``, ``POST /wake_up`` (with
``tags`` for a level-2 wake), ``POST /collective_rpc`` ``reload_weights``,
``GET /is_sleeping``. :class:`ReplicaCalls` is that seam; the tests give the
tier fake replicas behind it.

Main decision: every failure is one :class:`ReplicaCallFailed`, which says
whether CUDA ran out of memory (the tier then makes room and tries again),
whether a level-1 sleep found no host memory for the weights (pinned
allocation failed: the tier sleeps at level 2 instead) and the replica's
HTTP status (404 on ``/sleep``: the server has no sleep mode).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import aiohttp

__all__ = ["HttpReplicaCalls", "ReplicaCallFailed", "ReplicaCalls"]


class ReplicaCallFailed(Exception):
    """A call to a replica's development endpoint failed; ``out_of_memory`` when CUDA said so."""

    def __init__(
        self,
        message: str,
        *,
        out_of_memory: bool = False,
        status: int | None = None,
        host_memory: bool = False,
    ) -> None:
        super().__init__(message)
        self.out_of_memory = out_of_memory
        self.status = status  # the replica's HTTP status, when it answered
        # The node's host memory could not take the weights (a level-1 sleep).
        self.host_memory = host_memory


class ReplicaCalls(Protocol):
    """The replica endpoints the warm tier uses (``base`` is ``http://ip:port``)."""

    async def sleep(self, base: str, level: int) -> None: ...

    async def wake_up(self, base: str, tags: tuple[str, ...] = ()) -> None: ...

    async def reload_weights(self, base: str) -> None: ...

    async def warm_up(self, base: str) -> None: ...

    async def is_sleeping(self, base: str) -> bool: ...


class HttpReplicaCalls:
    """:class:`ReplicaCalls` over HTTP, as vLLM serves them with VLLM_SERVER_DEV_MODE=1."""

    def __init__(self, session: aiohttp.ClientSession, *, timeout_s: float = 60.0) -> None:
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def _call(
        self, method: str, url: str, *, json_body: Any = None, params: Any = None
    ) -> Any:
        try:
            async with self._session.request(
                method, url, json=json_body, params=params, timeout=self._timeout
            ) as resp:
                text = await resp.text()
                if resp.status >= 300:
                    lowered = text.lower()
                    raise ReplicaCallFailed(
                        f"{method} {url} answered {resp.status}: {text[:200]}",
                        out_of_memory="out of memory" in lowered,
                        status=resp.status,
                        host_memory="host memory" in lowered or "pinned" in lowered,
                    )
                return text
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ReplicaCallFailed(f"{method} {url} failed: {exc!r}") from exc

    async def sleep(self, base: str, level: int) -> None:
        await self._call("POST", f"{base}/sleep", params={"level": str(level)})

    async def wake_up(self, base: str, tags: tuple[str, ...] = ()) -> None:
        params = [("tags", t) for t in tags]
        await self._call("POST", f"{base}/wake_up", params=params or None)

    async def reload_weights(self, base: str) -> None:
        await self._call("POST", f"{base}/collective_rpc", json_body={"method": "reload_weights"})

    async def warm_up(self, base: str) -> None:
        # The served model's name, as vLLM lists it; one token is enough to
        # re-warm the caches and allocator.
        models = json.loads(await self._call("GET", f"{base}/v1/models"))
        data = models.get("data") if isinstance(models, dict) else None
        name = data[0].get("id") if isinstance(data, list) and data else None
        body: dict[str, Any] = {"prompt": "hi", "max_tokens": 1}
        if isinstance(name, str):
            body["model"] = name
        await self._call("POST", f"{base}/v1/completions", json_body=body)

    async def is_sleeping(self, base: str) -> bool:
        answer = json.loads(await self._call("GET", f"{base}/is_sleeping"))
        return bool(isinstance(answer, dict) and answer.get("is_sleeping"))
