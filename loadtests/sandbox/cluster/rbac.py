"""RBAC authorization over the store's Roles, ClusterRoles and bindings.

The rules are Kubernetes' own (``plugin/pkg/auth/authorizer/rbac``):

- ``system:masters`` may do anything;
- a ClusterRoleBinding grants its ClusterRole's rules everywhere; a
  RoleBinding grants its Role's (or ClusterRole's) rules in its namespace only;
- a subject matches by ``User`` name, ``Group`` name, or ``ServiceAccount``
  name and namespace;
- a rule matches when its ``verbs``, ``apiGroups`` and ``resources`` contain
  the request's (``*`` matches all; a subresource is ``deployments/scale``,
  and ``*/scale`` matches any resource's scale), and, when it lists
  ``resourceNames``, the request names one of them (a request without a name,
  such as list or create, never matches a rule with ``resourceNames``);
- non-resource paths match ``nonResourceURLs`` (``/healthz``, ``/api/*``);
  the discovery paths and self access reviews every cluster grants to
  ``system:authenticated`` (``system:discovery``,
  ``system:public-info-viewer``, ``system:basic-user``) are built in.

A denial is 403 with the real server's wording, e.g. ``deployments.apps "x" is
forbidden: User "system:serviceaccount:ns:sa" cannot patch resource
"deployments/scale" in API group "apps" in the namespace "ns"``.

Rules are read from the store on every check: the sandbox holds tens of
bindings, and reading them fresh means a test may create a Role and use it at
once, with no cache to go stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loadtests.sandbox.cluster.auth import UserInfo
from loadtests.sandbox.cluster.errors import Forbidden
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.store import Store

__all__ = ["Attributes", "RbacAuthorizer", "forbidden"]

# Paths every authenticated user may GET (system:discovery, system:public-info-viewer).
_DISCOVERY_PREFIXES = ("/api", "/apis", "/openapi", "/version", "/healthz", "/livez", "/readyz")


@dataclass(frozen=True, slots=True)
class Attributes:
    """One request as the authorizer sees it (``authorizer.Attributes``)."""

    user: UserInfo
    verb: str
    resource_request: bool
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


def forbidden(attrs: Attributes) -> Forbidden:
    """The 403 the real server sends for ``attrs``, word for word."""
    user = attrs.user.name
    if not attrs.resource_request:
        return Forbidden(
            f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"',
        )
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    reason = (
        f'User "{user}" cannot {attrs.verb} resource "{resource}" '
        f'in API group "{attrs.api_group}" {scope}'
    )
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    details: dict[str, Any] = {"kind": attrs.resource}
    if attrs.api_group:
        details["group"] = attrs.api_group
    if attrs.name:
        details["name"] = attrs.name
        return Forbidden(f'{qualified} "{attrs.name}" is forbidden: {reason}', details=details)
    return Forbidden(f"{qualified} is forbidden: {reason}", details=details)


def _subject_matches(subject: Mapping[str, Any], user: UserInfo, binding_ns: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name", "")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa = user.service_account
        ns = subject.get("namespace") or binding_ns
        return sa is not None and sa == (ns, name)
    return False


def _has(values: Iterable[str] | None, wanted: str) -> bool:
    values = list(values or ())
    return "*" in values or wanted in values


def _resource_matches(rule_resources: Iterable[str] | None, resource: str, sub: str) -> bool:
    combined = f"{resource}/{sub}" if sub else resource
    for item in rule_resources or ():
        if item in ("*", combined):
            return True
        if sub and item == f"*/{sub}":
            return True
        if sub and item == f"{resource}/*":
            return True
    return False


def rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or ():
            if url == "*" or url == attrs.path:
                return True
            if url.endswith("*") and attrs.path.startswith(url[:-1]):
                return True
        return False
    if not _has(rule.get("apiGroups"), attrs.api_group):
        return False
    if not _resource_matches(rule.get("resources"), attrs.resource, attrs.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or (bool(attrs.name) and attrs.name in names)


class RbacAuthorizer:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._roles = by_group_version_plural("rbac.authorization.k8s.io", "v1", "roles")
        self._cluster_roles = by_group_version_plural(
            "rbac.authorization.k8s.io", "v1", "clusterroles"
        )
        self._bindings = by_group_version_plural("rbac.authorization.k8s.io", "v1", "rolebindings")
        self._cluster_bindings = by_group_version_plural(
            "rbac.authorization.k8s.io", "v1", "clusterrolebindings"
        )

    def _rules(self, role_ref: Mapping[str, Any], namespace: str) -> list[Mapping[str, Any]]:
        kind, name = role_ref.get("kind"), role_ref.get("name", "")
        if kind == "ClusterRole" and self._cluster_roles is not None:
            role = self._store.peek(self._cluster_roles, None, name)
        elif kind == "Role" and self._roles is not None:
            role = self._store.peek(self._roles, namespace, name)
        else:
            role = None
        return list((role or {}).get("rules") or [])

    def allowed(self, attrs: Attributes) -> bool:
        if attrs.user.is_master:
            return True
        if (
            not attrs.resource_request
            and attrs.verb in ("get", "head")
            and attrs.path.startswith(_DISCOVERY_PREFIXES)
        ):
            return True
        if (
            attrs.resource_request
            and attrs.verb == "create"
            and attrs.api_group == "authorization.k8s.io"
            and attrs.resource in ("selfsubjectaccessreviews", "selfsubjectrulesreviews")
        ):
            return True  # system:basic-user, bound to system:authenticated in every cluster
        user = attrs.user
        if self._cluster_bindings is not None:
            items, _ = self._store.list(self._cluster_bindings, copy=False)
            for binding in items:
                if any(_subject_matches(s, user, "") for s in binding.get("subjects") or ()):
                    rules = self._rules(binding.get("roleRef") or {}, "")
                    if any(rule_allows(r, attrs) for r in rules):
                        return True
        if attrs.namespace and attrs.resource_request and self._bindings is not None:
            items, _ = self._store.list(self._bindings, namespace=attrs.namespace, copy=False)
            for binding in items:
                if any(
                    _subject_matches(s, user, attrs.namespace)
                    for s in binding.get("subjects") or ()
                ):
                    rules = self._rules(binding.get("roleRef") or {}, attrs.namespace)
                    if any(rule_allows(r, attrs) for r in rules):
                        return True
        return False

    def check(self, attrs: Attributes) -> None:
        if not self.allowed(attrs):
            raise forbidden(attrs)
