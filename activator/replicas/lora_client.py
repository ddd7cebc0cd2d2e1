"""The activator's calls to a vLLM replica about LoRA adapters: load, unload, look.

vLLM's endpoints (with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=true``):
``POST /v1/load_lora_adapter`` with ``{"lora_name", "lora_path"}`` and
``POST /v1/unload_lora_adapter`` with ``{"lora_name"}``, each ``200`` with a
sentence, else vLLM's error body; what is loaded is read from ``GET
/v1/models`` and ``GET /metrics`` (:mod:`activator.replicas.lora_state`).

Main decision: "already loaded" is success for a load (another activator or
an earlier try got there first) and "cannot be found" is success for an
unload; every other refusal is a :class:`LoadRefused` naming the replica,
the status and the server's message (and, where the load route itself is
missing, the variable that adds it), which takes that replica off for that
adapter.
"""

from __future__ import annotations

import json

import aiohttp

from activator.replicas.lora_state import LoraInfo, loaded_adapters, lora_info

__all__ = ["LORA_FIX", "HttpAdapterIO", "LoadRefused", "load", "look", "unload"]

# What a replica needs to load adapters at run time, as a refusal or an answer says it.
LORA_FIX = (
    "start vLLM with --enable-lora and set VLLM_ALLOW_RUNTIME_LORA_UPDATING=true (docs/adapters.md)"
)


class LoadRefused(Exception):
    """A replica would not load (or could not be asked to load) an adapter."""


async def _post(
    session: aiohttp.ClientSession, url: str, body: dict[str, str], timeout_s: float
) -> tuple[int, str]:
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with session.post(url, json=body, timeout=timeout) as resp:
        return resp.status, await resp.text()


def _message(text: str) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(doc, dict):
        return str(doc.get("message") or doc.get("detail") or text)[:200]
    return text.strip()[:200]


async def load(
    session: aiohttp.ClientSession, base_url: str, name: str, source: str, *, timeout_s: float
) -> None:
    """Load ``name`` from ``source``; raises :class:`LoadRefused` when the replica refuses."""
    try:
        status, text = await _post(
            session,
            f"{base_url}/v1/load_lora_adapter",
            {"lora_name": name, "lora_path": source},
            timeout_s,
        )
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise LoadRefused(f"{base_url} could not be asked to load {name!r}: {exc!r}") from exc
    if status == 200 or (status == 400 and "has already been loaded" in text):
        return
    message = _message(text)
    hint = ""
    if status in (404, 405) and message in ("Not Found", "Method Not Allowed"):
        # The route itself is missing: vLLM adds it only with runtime loading on.
        hint = f" (no runtime LoRA loading there: {LORA_FIX})"
    raise LoadRefused(f"{base_url} refused to load {name!r}: {status} {message}{hint}")


async def unload(
    session: aiohttp.ClientSession, base_url: str, name: str, *, timeout_s: float
) -> bool:
    """Unload ``name``; False when the replica refused (it stays counted as loaded)."""
    try:
        status, text = await _post(
            session, f"{base_url}/v1/unload_lora_adapter", {"lora_name": name}, timeout_s
        )
    except (aiohttp.ClientError, TimeoutError):
        return False
    return status == 200 or (status == 404 and "cannot be found" in text)


async def look(
    session: aiohttp.ClientSession, base_url: str, *, timeout_s: float
) -> tuple[frozenset[str], LoraInfo | None]:
    """The adapters the replica lists and its LoRA metric; raises ValueError or a client error."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with session.get(f"{base_url}/v1/models", timeout=timeout) as resp:
        if resp.status != 200:
            raise ValueError(f"{base_url}/v1/models answered {resp.status}")
        models = await resp.json(content_type=None)
    async with session.get(f"{base_url}/metrics", timeout=timeout) as resp:
        if resp.status != 200:
            raise ValueError(f"{base_url}/metrics answered {resp.status}")
        text = await resp.text()
    return loaded_adapters(models), lora_info(text)


class HttpAdapterIO:
    """These calls over one session, each bounded by ``timeout_s`` (a load: ``load_timeout_s``)."""

    def __init__(
        self, session: aiohttp.ClientSession, *, timeout_s: float, load_timeout_s: float
    ) -> None:
        self.session = session
        self.timeout_s = timeout_s
        self.load_timeout_s = load_timeout_s

    async def load(self, base_url: str, name: str, source: str) -> None:
        await load(self.session, base_url, name, source, timeout_s=self.load_timeout_s)

    async def unload(self, base_url: str, name: str) -> bool:
        return await unload(self.session, base_url, name, timeout_s=self.timeout_s)

    async def look(self, base_url: str) -> tuple[frozenset[str], LoraInfo | None]:
        return await look(self.session, base_url, timeout_s=self.timeout_s)
