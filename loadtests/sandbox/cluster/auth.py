"""Who is calling: bearer tokens to users, and the files clients log in with.

The emulated API server authenticates by bearer token only, as a cluster with
static and ServiceAccount tokens does. A token maps to a ``UserInfo`` (name
and groups, as the real authenticators produce them):

- the admin token: user ``sandbox-admin`` in ``system:masters`` (RBAC always
  allows it, as in a real cluster);
- a minted ServiceAccount token: ``system:serviceaccount:<ns>:<name>`` in
  ``system:serviceaccounts`` and ``system:serviceaccounts:<ns>``;
- any other user name the caller asks for (``mint_user_token``).

Every authenticated user is also in ``system:authenticated``. A missing or
unknown token is 401 ``Unauthorized``.

It also writes what clients read: a kubeconfig (CA inline, bearer token) and
an in-cluster directory (``token``, ``ca.crt``, ``namespace``) laid out as the
kubelet mounts a ServiceAccount, for clients' in-cluster configuration paths.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["TokenRegistry", "UserInfo", "in_cluster_files", "kubeconfig_document"]

ADMIN_USER = "sandbox-admin"


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = field(default=())

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) when this user is a ServiceAccount."""
        parts = self.name.split(":")
        if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
            return parts[2], parts[3]
        return None

    @property
    def is_master(self) -> bool:
        return "system:masters" in self.groups


class TokenRegistry:
    """Bearer tokens and the users they stand for."""

    def __init__(self) -> None:
        self._users: dict[str, UserInfo] = {}
        self.admin_token = self.mint_user_token(ADMIN_USER, groups=("system:masters",))

    def mint_user_token(self, name: str, *, groups: tuple[str, ...] = ()) -> str:
        token = secrets.token_urlsafe(24)
        self._users[token] = UserInfo(name, (*groups, "system:authenticated"))
        return token

    def mint_service_account_token(self, namespace: str, name: str) -> str:
        return self.mint_user_token(
            f"system:serviceaccount:{namespace}:{name}",
            groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
        )

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self._users.get(token.strip())

    def revoke(self, token: str) -> None:
        self._users.pop(token, None)


def kubeconfig_document(
    *, server_url: str, ca_pem: bytes, token: str, user: str, namespace: str = "default"
) -> str:
    """A kubeconfig with one cluster, user and context (CA inline)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "tidal-sandbox",
                "cluster": {
                    "server": server_url,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {
                "name": "tidal-sandbox",
                "context": {"cluster": "tidal-sandbox", "user": user, "namespace": namespace},
            }
        ],
        "current-context": "tidal-sandbox",
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def in_cluster_files(directory: Path, *, token: str, ca_pem: bytes, namespace: str) -> None:
    """Write ``token``, ``ca.crt`` and ``namespace`` as a pod's ServiceAccount mount has them."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(ca_pem)
    (directory / "namespace").write_text(namespace)
