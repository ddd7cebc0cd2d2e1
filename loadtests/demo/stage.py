"""What a demo story needs of the sandbox stack it plays on, and nothing more.

A story writes its models into the cluster's store, reads their state and
Events back from it, and sends requests to the stack's addresses; it never
starts or stops the stack's processes (:mod:`loadtests.demo.session` does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.stack_addresses import StackAddresses

__all__ = ["Stage"]


class Stage(Protocol):
    """The started stack, as a story sees it."""

    @property
    def cluster(self) -> SandboxCluster: ...

    @property
    def addresses(self) -> StackAddresses: ...

    @property
    def kubeconfig(self) -> Path: ...

    def deployment_state(self, name: str, namespace: str = "default") -> tuple[int, int, int]:
        """(spec.replicas, status.readyReplicas, pods that exist) of a Deployment."""
        ...
