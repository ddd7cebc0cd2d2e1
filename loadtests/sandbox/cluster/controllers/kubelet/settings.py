"""The kubelet's settings: restart back-off, probing, stopping, and where pods' files go.

The back-off is the real kubelet's: ``backoff_base_s`` (10 s) doubling to
``backoff_cap_s`` (5 min) between restarts of a container that exits, reset
once a process has run ``backoff_reset_s`` (10 min). ``tcp_probe_period_s``
paces the TCP probe a container without a readiness probe gets
(:mod:`~loadtests.sandbox.cluster.controllers.kubelet.probes`);
``force_stop_grace_s`` is the grace a pod removed from the API outright
(force delete, its node gone) is stopped with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["KubeletSettings"]


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    backoff_base_s: float = 10.0
    backoff_cap_s: float = 300.0
    backoff_reset_s: float = 600.0
    tcp_probe_period_s: float = 0.5
    force_stop_grace_s: float = 2.0
    default_port: int = 8000
    kubelet_version: str = "v1.32.2"
    # Where pod processes write their output (``<ns>_<pod>_<container>.log``).
    log_dir: Path | None = None
    # Where servers keep their shared memory ledgers, a time-sliced GPU's and
    # each node's host memory (None: a temporary directory of the kubelet's own).
    gpu_dir: Path | None = None
