"""The target index: snapshots kept current per watch event equal a full rebuild.

Covers:
- any sequence of Deployment and pod events (added, changed labels or
  selector, deleted, re-listed) leaves the same snapshots as matching every
  pod against every Deployment from scratch (property test);
- a snapshot a caller holds does not change when later events arrive;
- a Deployment event that keeps the selector keeps the matched pods without
  matching again; selectors without matchLabels (expressions only) are found
  too.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.kube.index import TargetIndex
from scaler.kube.types import (
    DeploymentInfo,
    LabelRequirement,
    LabelSelector,
    PodInfo,
    TargetSnapshot,
)

NAMESPACES = ("a", "b")
APPS = ("x", "y", "z")


def _deployment(ns: str, name: str, app: str, replicas: int = 1) -> DeploymentInfo:
    selector = LabelSelector(match_labels={"app": app})
    if app == "x-or-y":  # no matchLabels: found by scanning its namespace
        selector = LabelSelector(match_expressions=(LabelRequirement("app", "In", ("x", "y")),))
    return DeploymentInfo(
        namespace=ns,
        name=name,
        uid=f"uid-{name}",
        annotations={},
        spec_replicas=replicas,
        ready_replicas=replicas,
        selector=selector,
    )


def _pod(ns: str, name: str, app: str, ready: bool = True) -> PodInfo:
    return PodInfo(
        namespace=ns, name=name, labels={"app": app}, ip="10.0.0.1", ready=ready, terminating=False
    )


def _view(snapshots: dict[str, TargetSnapshot]) -> dict[str, tuple[object, ...]]:
    """Order-free: each target's Deployment and its pods sorted by name."""
    return {
        k: (s.deployment, sorted((p.name, p.ready, dict(p.labels)["app"]) for p in s.pods))
        for k, s in snapshots.items()
    }


_op = st.one_of(
    st.tuples(
        st.just("deploy"),
        st.sampled_from(NAMESPACES),
        st.sampled_from(("d1", "d2", "d3")),
        st.sampled_from((*APPS, "x-or-y")),
        st.integers(0, 3),
    ),
    st.tuples(
        st.just("undeploy"), st.sampled_from(NAMESPACES), st.sampled_from(("d1", "d2", "d3"))
    ),
    st.tuples(
        st.just("pod"),
        st.sampled_from(NAMESPACES),
        st.sampled_from(("p1", "p2", "p3", "p4")),
        st.sampled_from(APPS),
        st.booleans(),
    ),
    st.tuples(st.just("unpod"), st.sampled_from(NAMESPACES), st.sampled_from(("p1", "p2", "p3"))),
    st.tuples(st.just("relist"), st.sampled_from(NAMESPACES)),
    st.tuples(st.just("read")),
)


@given(ops=st.lists(_op, max_size=40))
@settings(max_examples=300, deadline=None)
def test_incremental_snapshots_equal_a_full_rebuild(ops: list[tuple[object, ...]]) -> None:
    index = TargetIndex()
    index.targets()  # from here on, events update the snapshot in place
    deployments: dict[str, DeploymentInfo] = {}
    pods: dict[tuple[str, str], PodInfo] = {}
    for op in ops:
        kind = op[0]
        if kind == "deploy":
            _, ns, name, app, replicas = op
            d = _deployment(str(ns), str(name), str(app), int(replicas))  # type: ignore[call-overload]
            deployments[d.key] = d
            index.put_deployment(d)
        elif kind == "undeploy":
            key = f"{op[1]}/{op[2]}"
            deployments.pop(key, None)
            index.delete_deployment(key)
        elif kind == "pod":
            _, ns, name, app, ready = op
            p = _pod(str(ns), str(name), str(app), bool(ready))
            pods[(p.namespace, p.name)] = p
            index.put_pod(p)
        elif kind == "unpod":
            pods.pop((str(op[1]), str(op[2])), None)
            index.delete_pod(str(op[1]), str(op[2]))
        elif kind == "relist":
            ns = str(op[1])
            index.reset_pods(ns, [p for (n, _), p in pods.items() if n == ns])
        else:
            index.targets()
    rebuilt = TargetIndex()
    rebuilt.reset_deployments(deployments.values())
    for ns in NAMESPACES:
        rebuilt.reset_pods(ns, [p for (n, _), p in pods.items() if n == ns])
    assert _view(dict(index.targets())) == _view(dict(rebuilt.targets()))


def test_held_snapshot_does_not_change_and_selector_kept() -> None:
    index = TargetIndex()
    index.reset_deployments([_deployment("a", "d1", "x")])
    index.reset_pods("a", [_pod("a", "p1", "x"), _pod("a", "p2", "y")])
    held = index.targets()
    assert [p.name for p in held["a/d1"].pods] == ["p1"]
    index.put_pod(_pod("a", "p3", "x"))
    index.put_deployment(replace(_deployment("a", "d1", "x"), spec_replicas=2))
    assert [p.name for p in held["a/d1"].pods] == ["p1"]  # the held one is unchanged
    now = index.targets()["a/d1"]
    assert now.deployment.spec_replicas == 2
    assert sorted(p.name for p in now.pods) == ["p1", "p3"]
    index.delete_deployment("a/d1")
    assert "a/d1" in held
    assert index.targets() == {}
