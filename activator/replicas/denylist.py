"""Replica endpoints that client requests never reach: vLLM's development API.

With ``VLLM_SERVER_DEV_MODE=1`` (which the warm tier needs for sleep mode)
vLLM also serves endpoints that change or reveal the engine: ``/sleep``,
``/wake_up``, ``/is_sleeping``, ``/collective_rpc``, ``/reset_prefix_cache``
and more; vLLM's own docs say not to expose them to users. Only Tidal's
scaler calls them, straight to the pod. The activator refuses a client
request for any of them with 403 (``activator.statuses``), whatever target
it routes to.

Main decision: the check runs on the path as the replica's server would
route it: percent-decoded, ``.``/``..`` and repeated slashes resolved, case
folded, query dropped, a trailing slash ignored. It looks at every suffix of
the path that starts at a segment boundary, so a path-prefix route
(``/llama/sleep``) is refused too; a model endpoint never ends in these names.
"""

from __future__ import annotations

import functools
import posixpath
from urllib.parse import unquote

__all__ = ["DENIED_PATHS", "is_denied"]

#: vLLM's development and administration endpoints (VLLM_SERVER_DEV_MODE,
#: the profiler, runtime LoRA loading, elastic expert parallelism).
DENIED_PATHS: frozenset[str] = frozenset(
    {
        "/sleep",
        "/wake_up",
        "/is_sleeping",
        "/collective_rpc",
        "/reset_prefix_cache",
        "/reset_mm_cache",
        "/server_info",
        "/start_profile",
        "/stop_profile",
        "/pause",
        "/resume",
        "/is_paused",
        "/scale_elastic_ep",
        "/is_scaling_elastic_ep",
        "/update_weights",
        "/v1/load_lora_adapter",
        "/v1/unload_lora_adapter",
    }
)
_LONGEST = max(p.count("/") for p in DENIED_PATHS)


def _normalize(raw_path: str) -> str:
    path = raw_path.split("?", 1)[0].split("#", 1)[0]
    # Twice: a replica behind another proxy may decode once more.
    path = unquote(unquote(path))
    path = posixpath.normpath("/" + path.lstrip("/"))
    return path.lower()


# Every request asks, and clients send the same few paths over and over: the
# answer for a path is cached so the request path pays a dict lookup, not two
# percent-decodings and a normalisation (bounded: odd paths cannot grow it).
@functools.lru_cache(maxsize=4096)
def is_denied(raw_path: str) -> bool:
    """True when ``raw_path`` would reach one of :data:`DENIED_PATHS` on a replica."""
    path = _normalize(raw_path)
    if path in DENIED_PATHS:
        return True
    segments = path.split("/")[1:]
    for take in range(1, min(_LONGEST, len(segments)) + 1):
        if "/" + "/".join(segments[-take:]) in DENIED_PATHS:
            return True
    return False
