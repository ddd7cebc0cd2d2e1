"""Pods of the Tidal image: what the kubelet runs for them.

Covers: which images are Tidal's; the environment as a kubelet sets it
(values, secretKeyRef decoded, configMapKeyRef, fieldRef, optional refs)
and the real wording when a Secret or key is missing; the command (the
image's ``tidal`` entrypoint, args appended), the pod's address for each
subcommand's listeners unless a flag says otherwise, and a kubeconfig of
the pod's service account in its namespace.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from loadtests.sandbox.cluster.controllers.base import NAMESPACES
from loadtests.sandbox.cluster.controllers.tidal_pods import (
    CONFIG_MAPS,
    SECRETS,
    PodConfigError,
    TidalPodFiles,
    container_env,
    is_tidal_image,
    tidal_command,
    tidal_spec_for,
)
from loadtests.sandbox.cluster.store import Store


@pytest.mark.parametrize(
    ("image", "tidal"),
    [
        ("tidal", True),
        ("ghcr.io/tidal-autoscaler/tidal:0.1.0", True),
        ("registry:5000/x/tidal@sha256:abc", True),
        ("vllm/vllm-openai:latest", False),
        ("ghcr.io/tidal/vllm:1", False),
    ],
)
def test_which_images_are_tidals(image: str, tidal: bool) -> None:
    assert is_tidal_image(image) is tidal


def _store() -> Store:
    store = Store()
    store.create(NAMESPACES, {"metadata": {"name": "tidal-system"}})
    assert SECRETS is not None and CONFIG_MAPS is not None
    store.create(
        SECRETS,
        {
            "metadata": {"name": "tidal-scaler-token", "namespace": "tidal-system"},
            "data": {"token": base64.b64encode(b"s3cret").decode()},
        },
    )
    store.create(
        CONFIG_MAPS,
        {"metadata": {"name": "knobs", "namespace": "tidal-system"}, "data": {"window": "20s"}},
    )
    return store


def _pod(container: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "tidal-activator-1", "namespace": "tidal-system"},
        "spec": {
            "serviceAccountName": "tidal-activator",
            "nodeName": "node-1",
            "containers": [{"name": "activator", "image": "tidal", **container}],
        },
    }


def test_environment_as_a_kubelet_sets_it() -> None:
    ref = {"name": "tidal-scaler-token", "key": "token"}
    container = {
        "env": [
            {"name": "PLAIN", "value": "1"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": ref}},
            {
                "name": "WINDOW",
                "valueFrom": {"configMapKeyRef": {"name": "knobs", "key": "window"}},
            },
            {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {
                "name": "GONE",
                "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": True}},
            },
        ]
    }
    pod = _pod(container)
    env = container_env(_store(), pod, pod["spec"]["containers"][0], host="127.9.1.1")
    assert env == {
        "PLAIN": "1",
        "TOKEN": "s3cret",
        "WINDOW": "20s",
        "ME": "tidal-activator-1",
        "IP": "127.9.1.1",
    }


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"name": "nope", "key": "token"}, 'secret "nope" not found'),
        (
            {"name": "tidal-scaler-token", "key": "other"},
            "couldn't find key other in Secret tidal-system/tidal-scaler-token",
        ),
    ],
)
def test_a_missing_secret_or_key_is_a_config_error(ref: dict[str, str], message: str) -> None:
    pod = _pod({"env": [{"name": "T", "valueFrom": {"secretKeyRef": ref}}]})
    with pytest.raises(PodConfigError, match=message):
        container_env(_store(), pod, pod["spec"]["containers"][0], host="127.9.1.1")


def test_command_addresses_and_kubeconfig(tmp_path: Path) -> None:
    written: list[tuple[str, str, Path]] = []

    def credentials(namespace: str, account: str, path: Path) -> Path:
        written.append((namespace, account, path))
        return path

    pod = _pod({"command": ["tidal"], "args": ["activator", "--admin-host", "0.0.0.0"]})
    spec = tidal_spec_for(
        _store(),
        pod,
        host="127.9.1.1",
        port=8080,
        credentials=credentials,
        files=TidalPodFiles(kubeconfig_dir=tmp_path, log_path=None, dns_table=tmp_path / "dns"),
    )
    assert tidal_command(spec)[-3:] == ["activator", "--admin-host", "0.0.0.0"]
    # Both listeners on the pod's address; the --admin-host flag still wins (flags over env).
    assert spec.env["TIDAL_ACTIVATOR_HOST"] == spec.env["TIDAL_ACTIVATOR_ADMIN_HOST"] == "127.9.1.1"
    assert written == [
        ("tidal-system", "tidal-activator", tmp_path / "tidal-system_tidal-activator-1.kubeconfig")
    ]
    assert spec.env["KUBECONFIG"] == str(written[0][2])
    assert spec.env["TIDAL_SANDBOX_DNS"] == str(tmp_path / "dns")
    other = _pod({"command": ["/bin/sh", "-c", "sleep 1"]})
    with pytest.raises(PodConfigError, match="runs the Tidal image's entrypoint"):
        tidal_spec_for(
            _store(),
            other,
            host="127.9.1.1",
            port=8080,
            credentials=None,
            files=TidalPodFiles(kubeconfig_dir=tmp_path, log_path=None),
        )
