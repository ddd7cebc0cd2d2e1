"""Named node pools: what ``tidal sandbox cluster --nodes`` takes besides a nodes file.

- ``default`` (:data:`~loadtests.sandbox.cluster.nodes.DEFAULT_POOL`): 2
  on-demand and 4 spot nodes of 8 GPUs across two zones, the GPUs not
  modelled (their servers run at the reference H100's speed);
- ``gpu-mix`` (:data:`GPU_MIX_POOL`): a cluster of modelled GPUs
  (:mod:`~loadtests.sandbox.cluster.gpu_nodes`), where a pod asking for a
  MIG profile or a GPU product finds it or stays Pending:

  ============  ==============  ==========  ======================================
  node          capacity        zone        GPUs
  ============  ==============  ==========  ======================================
  h100          on-demand       us-east-1a  8 whole H100 (``nvidia.com/gpu: 8``)
  h100-spot     spot            us-east-1b  8 whole H100
  h100-mig      on-demand       us-east-1a  8 H100 ``all-balanced``: 16 x 1g.10gb,
                                            8 x 2g.20gb, 8 x 3g.40gb
  a100-mig      on-demand       us-east-1b  8 A100-80GB ``all-3g.40gb``: 16 x 3g.40gb
  l4-1, l4-2    on-demand       us-east-1a  8 whole L4 each
  ============  ==============  ==========  ======================================

Main decision: a name is tried only when no file of that name exists, so a
nodes file called ``gpu-mix`` in the working directory still wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from loadtests.sandbox.cluster.nodes import DEFAULT_POOL, NodeSpec, load_nodes_file, parse_nodes

__all__ = ["GPU_MIX_POOL", "POOLS", "resolve_nodes"]

GPU_MIX_POOL: tuple[NodeSpec, ...] = parse_nodes(
    [
        {"name": "h100", "gpu": "H100-80GB", "zone": "us-east-1a"},
        {"name": "h100-spot", "gpu": "H100-80GB", "capacityType": "spot", "zone": "us-east-1b"},
        {"name": "h100-mig", "gpu": "H100-80GB", "mig": "all-balanced", "zone": "us-east-1a"},
        {"name": "a100-mig", "gpu": "A100-80GB", "mig": "all-3g.40gb", "zone": "us-east-1b"},
        {"name": "l4", "count": 2, "gpu": "L4", "zone": "us-east-1a"},
    ]
)

POOLS: Mapping[str, tuple[NodeSpec, ...]] = {"default": DEFAULT_POOL, "gpu-mix": GPU_MIX_POOL}


def resolve_nodes(value: str | None) -> tuple[NodeSpec, ...]:
    """The nodes of ``--nodes``: a nodes file, else a pool's name; the default pool for none."""
    if value is None:
        return DEFAULT_POOL
    path = Path(value)
    if path.exists() or value not in POOLS:
        return load_nodes_file(path)
    return POOLS[value]
