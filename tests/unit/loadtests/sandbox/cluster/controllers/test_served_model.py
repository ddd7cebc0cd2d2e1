"""Which model names a pod's fake server serves when its pod names none.

Covers: the names of ``routing.tidal.dev/models`` found up the owner chain
(pod -> ReplicaSet -> Deployment, and past a spot companion to the user's
Deployment), normalised for vLLM and cut to the first for Triton; a pod's
own ``sandbox.tidal.dev/model`` wins; a fake vLLM whose container args
name the served model (``--served-model-name``, ``--model``, ``vllm serve``)
serves those, as vLLM does; no routing annotation leaves the default.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster.controllers.base import DEPLOYMENTS, NAMESPACES, PODS, REPLICASETS
from loadtests.sandbox.cluster.controllers.kubelet.server_specs import (
    routed_models,
    server_spec_for,
)
from loadtests.sandbox.cluster.store import Store


def _owned(name: str, kind: str, owner: str | None, **meta: Any) -> dict[str, Any]:
    refs = [{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": "u", "controller": True}]
    return {
        "metadata": {"name": name, "namespace": "default", **meta, "ownerReferences": refs}
        if owner
        else {"name": name, "namespace": "default", **meta},
        "spec": {},
    }


def _pod(
    store: Store,
    name: str,
    annotations: dict[str, str] | None = None,
    args: list[str] | None = None,
) -> dict[str, Any]:
    pod = _owned(name, "ReplicaSet", "llama-spot-abc")
    pod["metadata"]["annotations"] = annotations or {}
    container = {"name": "vllm", "image": "vllm/vllm-openai", "args": args or []}
    pod["spec"] = {"containers": [container]}
    return store.create(PODS, pod)


def _chain(store: Store, models: str | None) -> None:
    store.create(NAMESPACES, {"metadata": {"name": "default"}})
    user = {"annotations": {"routing.tidal.dev/models": models}} if models else {}
    store.create(DEPLOYMENTS, _owned("llama", "Deployment", None, **user))
    store.create(DEPLOYMENTS, _owned("llama-spot", "Deployment", "llama"))
    store.create(REPLICASETS, _owned("llama-spot-abc", "Deployment", "llama-spot"))


def _spec_model(pod: dict[str, Any], store: Store) -> str:
    spec = server_spec_for(
        pod, host="127.0.0.9", default_port=8000, node_name="n", routed=routed_models(store, pod)
    )
    return spec.model


def test_names_come_from_the_users_deployment_past_a_companion() -> None:
    store = Store()
    _chain(store, "llama-3-8b, llama")
    pod = _pod(store, "a")
    assert routed_models(store, pod) == "llama-3-8b, llama"
    assert _spec_model(pod, store) == "llama-3-8b,llama"
    triton = _pod(store, "b", {"sandbox.tidal.dev/engine": "triton"})
    assert _spec_model(triton, store) == "llama-3-8b"
    own = _pod(store, "c", {"sandbox.tidal.dev/model": "mine"})
    assert _spec_model(own, store) == "mine"


def test_no_routing_annotation_leaves_the_default() -> None:
    store = Store()
    _chain(store, None)
    pod = _pod(store, "a")
    assert routed_models(store, pod) is None
    assert _spec_model(pod, store) == "sandbox-model"


@pytest.mark.parametrize(
    ("args", "served"),
    [
        (["--model", "meta-llama/Llama-3.1-8B", "--served-model-name", "llama-3-8b"], "llama-3-8b"),
        (["--served-model-name", "a", "b", "--port", "8000"], "a,b"),
        (["--served-model-name=a"], "a"),
        (["--model=meta-llama/Llama-3.1-8B"], "meta-llama/Llama-3.1-8B"),
        (["vllm", "serve", "meta-llama/Llama-3.1-8B", "--port", "8000"], "meta-llama/Llama-3.1-8B"),
    ],
)
def test_a_fake_vllm_serves_what_its_args_name_as_vllm_does(args: list[str], served: str) -> None:
    store = Store()
    _chain(store, "llama-3-8b, llama")  # the alias "llama" is routed but not served
    pod = _pod(store, "a", args=args)
    assert _spec_model(pod, store) == served
