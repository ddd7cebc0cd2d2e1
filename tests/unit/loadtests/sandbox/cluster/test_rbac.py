"""RBAC rule matching and the 403 wording, over a real store (no HTTP).

Covers: system:masters allowed everything; RoleBinding to a Role grants in its
namespace only; ClusterRoleBinding grants everywhere; RoleBinding to a
ClusterRole grants in the binding's namespace; subjects by User, Group and
ServiceAccount; wildcards for verbs, groups and resources; subresources
(``deployments/scale``, ``*/scale``); resourceNames never matching
unnamed requests; built-in discovery and self-review access; the Forbidden
messages for named, unnamed, cluster-scoped and non-resource requests.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.sandbox.cluster.auth import UserInfo
from loadtests.sandbox.cluster.rbac import Attributes, RbacAuthorizer, forbidden
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import Store

ROLES = by_group_version_plural("rbac.authorization.k8s.io", "v1", "roles")
CLUSTER_ROLES = by_group_version_plural("rbac.authorization.k8s.io", "v1", "clusterroles")
BINDINGS = by_group_version_plural("rbac.authorization.k8s.io", "v1", "rolebindings")
CLUSTER_BINDINGS = by_group_version_plural("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
NAMESPACES = by_group_version_plural("", "v1", "namespaces")
assert ROLES and CLUSTER_ROLES and BINDINGS and CLUSTER_BINDINGS and NAMESPACES

SA = UserInfo(
    "system:serviceaccount:tidal:scaler",
    ("system:serviceaccounts", "system:serviceaccounts:tidal", "system:authenticated"),
)
ALICE = UserInfo("alice", ("devs", "system:authenticated"))


def ref(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


@pytest.fixture
def authorizer() -> RbacAuthorizer:
    store = Store()
    for ns in ("tidal", "other"):
        store.create(NAMESPACES, {"metadata": {"name": ns}})
    store.create(
        ROLES,
        {
            "metadata": {"name": "scaler", "namespace": "tidal"},
            "rules": [
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments/scale"],
                    "verbs": ["patch"],
                    "resourceNames": ["llama"],
                },
                {"apiGroups": [""], "resources": ["*/status"], "verbs": ["*"]},
            ],
        },
    )
    store.create(
        BINDINGS,
        {
            "metadata": {"name": "scaler", "namespace": "tidal"},
            "roleRef": ref("Role", "scaler"),
            "subjects": [{"kind": "ServiceAccount", "name": "scaler", "namespace": "tidal"}],
        },
    )
    store.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": "node-reader"},
            "rules": [
                {"apiGroups": ["*"], "resources": ["nodes"], "verbs": ["get", "list"]},
                {"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]},
            ],
        },
    )
    store.create(
        CLUSTER_BINDINGS,
        {
            "metadata": {"name": "devs-read-nodes"},
            "roleRef": ref("ClusterRole", "node-reader"),
            "subjects": [{"kind": "Group", "name": "devs"}],
        },
    )
    store.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": "pod-editor"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}],
        },
    )
    store.create(
        BINDINGS,
        {
            "metadata": {"name": "alice-pods", "namespace": "other"},
            "roleRef": ref("ClusterRole", "pod-editor"),
            "subjects": [{"kind": "User", "name": "alice"}],
        },
    )
    return RbacAuthorizer(store)


def res(
    user: UserInfo,
    verb: str,
    resource: str,
    *,
    group: str = "",
    ns: str = "",
    name: str = "",
    sub: str = "",
) -> Attributes:
    return Attributes(
        user=user,
        verb=verb,
        resource_request=True,
        api_group=group,
        resource=resource,
        subresource=sub,
        namespace=ns,
        name=name,
    )


@pytest.mark.parametrize(
    ("attrs", "allowed"),
    [
        pytest.param(
            res(SA, "list", "deployments", group="apps", ns="tidal"), True, id="role-list"
        ),
        pytest.param(
            res(SA, "list", "deployments", group="apps", ns="other"), False, id="role-other-ns"
        ),
        pytest.param(
            res(SA, "patch", "deployments", group="apps", ns="tidal", name="llama"),
            False,
            id="no-patch-main",
        ),
        pytest.param(
            res(SA, "patch", "deployments", group="apps", ns="tidal", name="llama", sub="scale"),
            True,
            id="scale-named",
        ),
        pytest.param(
            res(SA, "patch", "deployments", group="apps", ns="tidal", name="mistral", sub="scale"),
            False,
            id="scale-other-name",
        ),
        pytest.param(
            res(SA, "update", "pods", ns="tidal", name="p", sub="status"),
            True,
            id="star-slash-status",
        ),
        pytest.param(
            res(SA, "update", "pods", ns="tidal", name="p"), False, id="not-main-resource"
        ),
        pytest.param(res(ALICE, "list", "nodes"), True, id="group-cluster-binding"),
        pytest.param(res(ALICE, "delete", "nodes", name="n"), False, id="verb-not-granted"),
        pytest.param(
            res(ALICE, "delete", "pods", ns="other", name="p"),
            True,
            id="clusterrole-via-rolebinding",
        ),
        pytest.param(
            res(ALICE, "delete", "pods", ns="tidal", name="p"), False, id="rolebinding-ns-only"
        ),
        pytest.param(
            Attributes(user=ALICE, verb="get", resource_request=False, path="/debug/pprof"),
            True,
            id="non-resource-wildcard",
        ),
        pytest.param(
            Attributes(user=SA, verb="get", resource_request=False, path="/metrics"),
            False,
            id="non-resource-denied",
        ),
        pytest.param(
            Attributes(user=SA, verb="get", resource_request=False, path="/apis/apps/v1"),
            True,
            id="discovery-builtin",
        ),
        pytest.param(
            res(SA, "create", "selfsubjectaccessreviews", group="authorization.k8s.io"),
            True,
            id="basic-user",
        ),
        pytest.param(
            res(UserInfo("x", ("system:masters",)), "delete", "nodes", name="n"), True, id="masters"
        ),
    ],
)
def test_rules(authorizer: RbacAuthorizer, attrs: Attributes, allowed: bool) -> None:
    assert authorizer.allowed(attrs) is allowed


def test_forbidden_wording() -> None:
    named = forbidden(
        res(SA, "patch", "deployments", group="apps", ns="tidal", name="x", sub="scale")
    )
    assert named.code == 403 and named.reason == "Forbidden"
    assert named.message == (
        'deployments.apps "x" is forbidden: User "system:serviceaccount:tidal:scaler" cannot patch '
        'resource "deployments/scale" in API group "apps" in the namespace "tidal"'
    )
    details: Any = named.details
    assert details == {"kind": "deployments", "group": "apps", "name": "x"}
    assert forbidden(res(ALICE, "list", "nodes")).message == (
        'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" '
        "at the cluster scope"
    )
    assert forbidden(
        Attributes(user=ALICE, verb="get", resource_request=False, path="/x")
    ).message == ('forbidden: User "alice" cannot get path "/x"')
