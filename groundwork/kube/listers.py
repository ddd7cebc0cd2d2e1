"""List calls for a Reflector, for code outside the kube packages (Pods, custom objects).

A Reflector takes a kubernetes_asyncio list method (it calls it once to
list and again with ``watch=True``), but only the kube packages may import
kubernetes_asyncio (docs/architecture.md, "Layout and import rules").
Tools beside the services (the sandbox's fake endpoint picker) get their
list calls here: namespaced Pods, and any namespaced custom resource
(``InferencePool`` of ``inference.networking.k8s.io/v1``) by group,
version and plural. Each returns the method itself, so the Reflector's
keyword arguments (``namespace``, ``field_selector``, ``watch``,
``resource_version``...) pass straight through.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

__all__ = ["ListCall", "custom_objects", "pods"]

ListCall = Callable[..., Awaitable[Any]]


def pods(api: client.ApiClient) -> ListCall:
    """Pods of one namespace (``namespace=`` in the Reflector's list arguments)."""
    core: Any = client.CoreV1Api(api)
    call: ListCall = core.list_namespaced_pod
    return call


def custom_objects(api: client.ApiClient, *, group: str, version: str, plural: str) -> ListCall:
    """Custom objects of one kind in one namespace (``namespace=`` in the list arguments)."""
    custom: Any = client.CustomObjectsApi(api)
    call: ListCall = functools.partial(
        custom.list_namespaced_custom_object, group=group, version=version, plural=plural
    )
    return call
