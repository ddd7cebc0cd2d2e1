"""GPU shapes for the simulator: a table of public list prices, and the model's engine on each.

``tidal simulate --shapes`` runs a model on several shapes
(docs/shapes.md): each as the scaler reads it (the cluster's table,
:func:`~scaler.policy.shapes.declarations.parse_shape_table`, and the
Deployment's ``placement.tidal.dev/shapes`` with its per-shape arguments,
:func:`~scaler.policy.shapes.declarations.read_shapes`), and the engine the
sandbox's fake vLLM would run there
(:func:`~simulator.engine.device_fit.fit_to_device`: prefill by the
device's compute, decode by its bandwidth, the KV cache by the memory the
weights leave, from the ratios of ``groundwork/gpu_catalog.py``).

:data:`LIST_PRICES` is the table the docs quote, dollars per replica-hour,
on-demand, AWS us-east-1 list prices per GPU as the scaler's default price
table has them (``scaler/policy/placement/cost.py``, which cites each):

- ``h100``: one H100 80GB, p5.48xlarge $98.32/h for 8 (the list price
  before AWS's June 2025 P5 cut; https://aws.amazon.com/ec2/instance-types/p5/):
  $12.29;
- ``a100``: one A100 40GB, p4d.24xlarge $32.7726/h for 8
  (https://aws.amazon.com/ec2/instance-types/p4/): $4.10;
- ``mig-3g.40gb``: a 3g.40gb slice of an H100, priced at its share of the
  H100's compute, 3 of its 7 compute slices (NVIDIA's MIG user guide,
  "Supported MIG Profiles"): $5.27. No cloud sells a slice: what one costs
  is what a platform charges the teams sharing the GPU, and the compute
  share is the usual rule;
- ``l4``: one L4, g6.xlarge $0.8048/h (https://aws.amazon.com/ec2/instance-types/g6/):
  $0.80.

Figures read on 2026-11-29 from those pages as the repository cites them.
The smaller H100 slices (``1g.10gb``, ``2g.20gb``) cannot hold an 8B
model's 15 GB of weights and 4 GB of activations, and are left out.

:data:`SHAPE_ARGS` are each shape's ``--max-model-len``, as
``shape-args`` would set it: an 8B model leaves about 126,000 tokens of KV
cache on a 40 GB slice (less than its 131,072-token context, so vLLM
refuses to start without it), about 9,700 on an L4.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from groundwork.gpu_catalog import REFERENCE, device_for
from scaler.policy.shapes.declarations import (
    SHAPE_ARGS_PREFIX,
    SHAPES,
    ChosenShape,
    parse_shape_table,
    read_shapes,
)
from simulator.engine import LlmParams
from simulator.engine.device_fit import fit_to_device
from simulator.engine.sleep_timing import DEFAULT_WEIGHTS_MIB
from simulator.world import WorldShape

__all__ = ["LIST_PRICES", "SHAPE_ARGS", "SimShapes", "sim_shapes"]

_H100 = "NVIDIA-H100-80GB-HBM3"

#: The shape table of public list prices (module docstring), as a ConfigMap's data.
LIST_PRICES: Mapping[str, str] = {
    "h100": f"resource=nvidia.com/gpu, gpu-product={_H100}, on-demand=12.29",
    "a100": "resource=nvidia.com/gpu, gpu-product=NVIDIA-A100-SXM4-40GB, on-demand=4.10",
    "mig-3g.40gb": f"resource=nvidia.com/mig-3g.40gb, gpu-product={_H100}, on-demand=5.27",
    "l4": "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=0.80",
}

#: Each shape's ``shape-args`` (module docstring).
SHAPE_ARGS: Mapping[str, str] = {
    "a100": "--max-model-len 32768",
    "mig-3g.40gb": "--max-model-len 32768",
    "l4": "--max-model-len 8192",
}


@dataclass(frozen=True, slots=True)
class SimShapes:
    """A model's shapes as the scaler reads them, and the world that offers them."""

    chosen: tuple[ChosenShape, ...]
    world: tuple[WorldShape, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.shape.name for c in self.chosen)

    @property
    def prices(self) -> dict[str, float]:
        """Dollars per replica-hour by shape (on-demand)."""
        return {c.shape.name: c.shape.prices.on_demand for c in self.chosen}

    def annotations(self, names: Sequence[str] | None = None) -> dict[str, str]:
        """The Deployment's shape annotations for ``names`` (default: all, in order)."""
        listed = list(self.names if names is None else names)
        out = {SHAPES: ",".join(listed)}
        for c in self.chosen:
            if c.shape.name in listed and c.args:
                out[SHAPE_ARGS_PREFIX + c.shape.name] = " ".join(c.args)
        return out

    def only(self, names: Sequence[str]) -> SimShapes:
        """These shapes alone, in the order given."""
        keep = {c.shape.name: c for c in self.chosen}
        offered = {w.name: w for w in self.world}
        return SimShapes(tuple(keep[n] for n in names), tuple(offered[n] for n in names))


def sim_shapes(
    table: Mapping[str, str] = LIST_PRICES,
    args: Mapping[str, str] = SHAPE_ARGS,
    *,
    names: Sequence[str] | None = None,
    engine: LlmParams | None = None,
    supply: Mapping[str, int] | None = None,
    weights_mib: int = DEFAULT_WEIGHTS_MIB,
) -> SimShapes:
    """The shapes ``names`` (default: the table's, in its order) of ``table``, each with
    the model's engine on it (``engine``: on the reference H100) and its ``supply``
    (replicas of it the cluster holds at once; absent: no bound).

    Raises ``ValueError`` naming what is wrong: a bad table entry or argument, a shape
    the GPU catalog does not know, or a model that does not fit a shape (vLLM's words).
    """
    parsed, problems = parse_shape_table(table)
    listed = list(table) if names is None else list(names)
    annotations = {SHAPES: ",".join(listed)}
    annotations |= {SHAPE_ARGS_PREFIX + n: a for n, a in args.items() if n in listed}
    reading = read_shapes(annotations, parsed)
    if problems or reading.problems:
        raise ValueError("; ".join(str(p) for p in (*problems, *reading.problems)))
    engine = engine or LlmParams()
    world = []
    for chosen in reading.shapes:
        shape = chosen.shape
        product = dict(shape.node_selector).get("nvidia.com/gpu.product", "")
        found = device_for(product, shape.resource)
        if found is None:
            raise ValueError(
                f"shape {shape.name}: the GPU catalog has no {product} {shape.resource}; the"
                " simulator models only the devices of groundwork/gpu_catalog.py"
            )
        max_model_len = chosen.max_model_len or engine.max_model_len
        fitted = fit_to_device(
            engine,
            compute_ratio=found.compute_ratio,
            bandwidth_ratio=found.bandwidth_ratio,
            memory_mib=found.memory_mib,
            reference_memory_mib=REFERENCE.memory_mib,
            weights_mib=weights_mib,
            max_model_len=max_model_len,
            count=shape.count,
        )
        fitted = replace(fitted, max_model_len=max_model_len)
        world.append(WorldShape(shape.name, fitted, (supply or {}).get(shape.name)))
    return SimShapes(reading.shapes, tuple(world))
