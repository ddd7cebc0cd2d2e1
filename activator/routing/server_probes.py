"""The routes clients probe a model server with, answered by the activator as vLLM does.

Benchmark tools and OpenAI-style clients check a server before they send
it work: GuideLLM asks ``GET /health`` and stops when it is not a 2xx;
``vllm bench serve`` lists ``GET /v1/models`` for the model and its
``root`` (the tokenizer it loads); load balancers and SageMaker ask
``/ping``. A client pointed at the activator must find them there, at zero
replicas as well (the activator takes requests for a model with no replica:
that is its job). So where no target claims the route (by header, host or
path prefix: then the request goes to the target's replicas, held while they
wake), the activator answers these itself, in vLLM's shapes
(vllm/entrypoints/openai/api_server.py and its routers):

=====================  ===========================================================
route                  answer
=====================  ===========================================================
``GET /health``        200, empty body: the activator takes requests (503
                       ``draining`` while it shuts down, as vLLM's 503 when
                       its engine is dead)
``GET|POST /ping``     the same (SageMaker's health route, which vLLM serves)
``GET /version``       200 ``{"version": "<Tidal's version>", "server":
                       "tidal-activator"}``: the activator's, not a model
                       server's (there may be none, or several versions)
``GET /v1/models``     the models routed by name (:func:`model_card`)
``GET /v1/models/ID``  one of them (OpenAI's retrieval; vLLM has no such route)
=====================  ===========================================================

Main decision, the model cards carry every field vLLM's do (``id``,
``object``, ``created``, ``owned_by``, ``root``, ``parent``,
``max_model_len``, ``permission``) with what the activator knows without a
replica: ``root`` is the served name (vLLM's is the model's path, which is
the served name unless ``--served-model-name`` renames it), ``parent`` the
base model of a LoRA adapter, ``max_model_len`` null (only a replica knows
its context length), ``owned_by`` the target that serves it, ``created`` 0.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json

__all__ = ["ProbeAnswer", "model_card", "probe_answer", "probes"]

_HEALTH_PATHS = frozenset({"/health", "/ping"})
_VERSION_PATH = "/version"

#: ``(status, reason, content type, body)`` of one probe's answer.
ProbeAnswer = tuple[int, bytes, bytes, bytes]


def probes(method: str, path: str) -> bool:
    """Whether ``method path`` is one of the probe routes (module docstring) other than
    the model list, which :mod:`activator.routing.table` recognises."""
    bare = path.split("?", 1)[0]
    if bare == "/ping":
        return method in ("GET", "POST")
    return method == "GET" and (bare in _HEALTH_PATHS or bare == _VERSION_PATH)


def probe_answer(method: str, path: str) -> ProbeAnswer | None:
    """The activator's answer to a probe route, None when ``method path`` is none."""
    if not probes(method, path):
        return None
    if path.split("?", 1)[0] == _VERSION_PATH:
        return 200, b"OK", b"application/json", _version_body()
    return 200, b"OK", b"text/plain; charset=utf-8", b""


@functools.cache
def _version_body() -> bytes:
    try:
        version = importlib.metadata.version("tidal-autoscaler")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        version = "0+unknown"
    return json.dumps({"version": version, "server": "tidal-activator"}).encode()


def model_card(model: str, *, owner: str, parent: str | None) -> dict[str, object]:
    """One entry of ``GET /v1/models`` with vLLM's fields (module docstring)."""
    return {
        "id": model,
        "object": "model",
        # Required by OpenAI's schema; the activator does not know when a
        # model was made, so it says 0.
        "created": 0,
        "owned_by": owner,
        "root": model,
        "parent": parent,
        "max_model_len": None,
        "permission": [
            {
                "id": f"modelperm-{model}",
                "object": "model_permission",
                "created": 0,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
