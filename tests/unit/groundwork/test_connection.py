"""Finding the cluster: groundwork.kube.connection.connect (no server needed).

Covers: an explicit kubeconfig gives the server, the bearer token and the
current context's namespace; ``context`` picks another context and its
namespace; ``$KUBECONFIG`` is read when no path is given; with no
kubeconfig anywhere and no in-cluster account the error says what to set;
a broken kubeconfig is named in the error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwork.kube.connection import KubeConfigError, connect


def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "contexts:\n"
        "- {name: a, context: {cluster: k, user: u, namespace: models}}\n"
        "- {name: b, context: {cluster: k, user: u}}\n"
        'clusters: [{name: k, cluster: {server: "http://127.0.0.1:8001"}}]\n'
        "users: [{name: u, user: {token: s3cret}}]\n"
    )
    return path


async def test_kubeconfig_gives_server_token_and_namespace(tmp_path: Path) -> None:
    access = await connect(kubeconfig=str(kubeconfig(tmp_path)))
    try:
        assert access.api.configuration.host == "http://127.0.0.1:8001"
        assert access.api.configuration.api_key["BearerToken"] == "Bearer s3cret"
        assert access.namespace == "models"
        assert access.source == f"kubeconfig:{tmp_path / 'kubeconfig'}"
    finally:
        await access.close()


async def test_context_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path)))
    access = await connect(context="b")
    try:
        assert access.namespace == "default"
    finally:
        await access.close()


async def test_no_configuration_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeConfigError, match="set KUBECONFIG"):
        await connect()


async def test_broken_kubeconfig_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n")
    with pytest.raises(KubeConfigError, match=str(path)):
        await connect(kubeconfig=str(path))
