"""Which Deployment an opted-in InferencePool scales (scaler.kube.pool_index).

Covers: a pool selects the Deployments whose pod template carries all of
its matchLabels, and is bound to one when it selects exactly one that no
other opted-in pool selects; a pool that selects none, several, or one it
shares with another pool is bound to nothing and says why; Tidal's own
companion Deployments (annotated companion-of) are never counted; a pool
that is not opted in is not kept; a pool whose namespace's Deployments
were not listed yet says nothing; events after the list (a Deployment
relabelled, deleted, a pool deleted) move the binding; the namespaces to
watch are those holding an opted-in pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from scaler.kube.pool_index import PoolIndex
from scaler.kube.types import DeploymentInfo, LabelSelector, PoolInfo
from scaler.policy.placement.companion import COMPANION_OF


def deployment(name: str, labels: Mapping[str, str], *, ns: str = "ml") -> DeploymentInfo:
    return DeploymentInfo(
        namespace=ns,
        name=name,
        uid=f"uid-{name}",
        annotations={},
        spec_replicas=0,
        ready_replicas=0,
        selector=LabelSelector(match_labels=dict(labels)),
        pod_labels=dict(labels),
    )


def pool(
    name: str, selector: Mapping[str, str], *, ns: str = "ml", opted_in: bool = True
) -> PoolInfo:
    return PoolInfo(
        namespace=ns,
        name=name,
        uid=f"uid-{name}",
        labels={},
        annotations={},
        selector=dict(selector),
        opted_in=opted_in,
    )


def index(*pools: PoolInfo, deployments: tuple[DeploymentInfo, ...] = ()) -> PoolIndex:
    got = PoolIndex()
    got.reset_pools(pools)
    for ns in {p.namespace for p in pools}:
        got.reset_deployments(ns, [d for d in deployments if d.namespace == ns])
    return got


def test_a_pool_that_selects_one_deployment_scales_it() -> None:
    llama = deployment("llama", {"app": "llama", "tier": "gpu"})
    other = deployment("mistral", {"app": "mistral"})
    got = index(pool("llama", {"app": "llama"}), deployments=(llama, other))
    state = got.states()["ml/llama"]
    assert (state.selected, state.bound_to) == (("ml/llama",), "ml/llama")
    assert got.bound() == {"ml/llama": (llama, state.pool)}


def test_none_several_or_shared_binds_nothing_and_says_why() -> None:
    prefill = deployment("prefill", {"model": "llama", "role": "prefill"})
    decode = deployment("decode", {"model": "llama", "role": "decode"})
    got = index(
        pool("both", {"model": "llama"}),
        pool("nothing", {"model": "gpt"}),
        pool("decode-only", {"role": "decode"}),
        deployments=(prefill, decode),
    )
    states = got.states()
    assert states["ml/both"].selected == ("ml/decode", "ml/prefill")
    assert states["ml/nothing"].selected == ()
    assert states["ml/decode-only"].shared_with == ("ml/both",)
    assert [s.bound_to for s in states.values()] == [None, None, None]
    assert got.bound() == {}


def test_companions_are_not_counted_and_pools_not_opted_in_are_not_kept() -> None:
    llama = deployment("llama", {"app": "llama"})
    spot = replace(deployment("llama-spot", {"app": "llama"}), annotations={COMPANION_OF: "llama"})
    got = index(
        pool("llama", {"app": "llama"}),
        pool("off", {"app": "llama"}, opted_in=False),
        deployments=(llama, spot),
    )
    assert list(got.states()) == ["ml/llama"]
    assert got.states()["ml/llama"].bound_to == "ml/llama"


def test_nothing_is_said_before_the_namespace_is_listed_and_events_move_the_binding() -> None:
    got = PoolIndex()
    got.put_pool(pool("llama", {"app": "llama"}))
    assert got.namespaces() == {"ml"}
    assert got.states()["ml/llama"].listed is False
    assert got.states()["ml/llama"].bound_to is None
    got.reset_deployments("ml", [])
    assert got.states()["ml/llama"].listed and got.states()["ml/llama"].selected == ()
    got.put_deployment(deployment("llama", {"app": "llama"}))
    assert got.states()["ml/llama"].bound_to == "ml/llama"
    got.put_deployment(deployment("llama", {"app": "llama-v2"}))  # relabelled away
    assert got.states()["ml/llama"].bound_to is None
    got.put_deployment(deployment("v2", {"app": "llama"}))
    assert got.states()["ml/llama"].bound_to == "ml/v2"
    got.delete_deployment("ml", "v2")
    assert got.bound() == {}
    got.delete_pool("ml/llama")
    assert got.states() == {} and got.namespaces() == set()
