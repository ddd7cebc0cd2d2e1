"""GPU shapes: the cluster's table of them, and the ones a Deployment may run on (docs/shapes.md).

A **shape** is what one replica runs on: an extended resource and how many
of it (``nvidia.com/gpu: 1``, ``nvidia.com/mig-3g.40gb: 1``), the nodes
that have it (GPU feature discovery's ``nvidia.com/gpu.product``), what
one replica costs per hour on demand and on spot, and its capacity
against the reference GPU (one H100 80GB) as a prior for what a replica
buys. The cluster states them once, in the ConfigMap ``tidal-shapes``
labelled ``tidal.dev/shapes: "true"``, one ``data`` key per shape::

    h100: resource=nvidia.com/gpu, gpu-product=NVIDIA-H100-80GB-HBM3, on-demand=12.29, spot=3.69
    mig-3g.40gb: resource=nvidia.com/mig-3g.40gb, gpu-product=NVIDIA-H100-80GB-HBM3, on-demand=5.27
    tpu-ish: resource=example.com/accel, select.example.com/pool=a, on-demand=3, compute=0.5,
             bandwidth=0.4, memory=0.3

=================  ==========================================================================
field              allowed
=================  ==========================================================================
``resource``       required: an extended resource, ``<domain>/<name>`` (not ``kubernetes.io``)
``count``          1 to 16 (default 1): how many of it one replica takes
``gpu-product``    a node's ``nvidia.com/gpu.product``: the node selector
``select.<label>`` more node-selector labels (``select.cloud.google.com/gke-accelerator=...``)
``on-demand``      required: dollars per hour for one replica, 0 or more
``spot``           dollars per hour on spot; unset: the shape is not bought on spot
``compute``        prefill speed against the reference GPU, above 0 (up to 64)
``bandwidth``      decode speed against the reference GPU, above 0 (up to 64)
``memory``         memory against the reference GPU, above 0 (up to 64)
=================  ==========================================================================

``compute``, ``bandwidth`` and ``memory`` default to the GPU catalog's
ratios (``groundwork.gpu_catalog``: spec-sheet TFLOPS, bandwidth and
memory, a MIG slice's share of them) times ``count`` when ``gpu-product``
and ``resource`` name a device it knows, and are required otherwise.

A Deployment lists the shapes it may run on and may adjust its container
per shape (the keys of :data:`SHAPE_SPECS`)::

    placement.tidal.dev/shapes: h100,mig-3g.40gb,l4
    placement.tidal.dev/shape-args.mig-3g.40gb: --max-model-len 16384 --gpu-memory-utilization=0.95
    placement.tidal.dev/shape-env.l4: VLLM_ATTENTION_BACKEND=FLASHINFER
    placement.tidal.dev/shape-price.l4: on-demand=0.70,spot=0.21

Main decisions:

- **What was valid is kept.** :func:`parse_shape_table` and
  :func:`read_shapes` return what parsed beside every problem
  (:class:`~scaler.policy.invalid_annotation.AnnotationProblem`: the key, the
  value, what is allowed); :meth:`ShapesReading.error` is the one
  :class:`~scaler.policy.invalid_annotation.InvalidAnnotation` naming them all, as
  for every other key. A bad shape in the table is left out; a bad override
  leaves its shape as the table has it, so a model goes on with the shapes
  that were declared well.
- **A price is per replica**, not per GPU: it is what the shape's
  resources cost together, so a two-GPU shape states twice a GPU's price.
- Shape names are lowercase DNS labels with dots, at most 32 characters,
  so that ``<deployment>-<shape>`` is a Deployment name and
  ``shape-price.<shape>`` an annotation name.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TypeVar

from groundwork.gpu_catalog import device_for
from groundwork.rules.scaling_keys import PLACEMENT_PREFIX
from scaler.policy.invalid_annotation import AnnotationProblem, InvalidAnnotation

__all__ = [
    "GPU_PRODUCT_LABEL",
    "SHAPES",
    "SHAPES_CONFIGMAP",
    "SHAPES_LABEL",
    "SHAPE_ARGS_PREFIX",
    "SHAPE_ENV_PREFIX",
    "SHAPE_PRICE_PREFIX",
    "SHAPE_SPECS",
    "AnnotationSpec",
    "Capacity",
    "ChosenShape",
    "Prices",
    "Shape",
    "ShapeTable",
    "ShapesReading",
    "is_shape_key",
    "parse_shape_table",
    "read_shapes",
]

SHAPES_CONFIGMAP = "tidal-shapes"
SHAPES_LABEL = "tidal.dev/shapes"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
SHAPES = PLACEMENT_PREFIX + "shapes"
SHAPE_ARGS_PREFIX = PLACEMENT_PREFIX + "shape-args."
SHAPE_ENV_PREFIX = PLACEMENT_PREFIX + "shape-env."
SHAPE_PRICE_PREFIX = PLACEMENT_PREFIX + "shape-price."
_OVERRIDE_PREFIXES = (SHAPE_ARGS_PREFIX, SHAPE_ENV_PREFIX, SHAPE_PRICE_PREFIX)


@dataclass(frozen=True, slots=True)
class AnnotationSpec:
    """A row of docs/annotations.md for a key this module reads with its own reader
    (``placement.tidal.dev/shape-args.<shape>`` is a family of keys, one per shape), where
    a key of :data:`~groundwork.rules.scaling_keys.SCALING_KEYS` has its grammar instead."""

    key: str
    default: str
    allowed: str
    meaning: str


#: The Deployment's keys, rows of docs/annotations.md.
SHAPE_SPECS: tuple[AnnotationSpec, ...] = (
    AnnotationSpec(
        SHAPES,
        "",
        "comma-separated shape names of the cluster's `tidal-shapes` table, each once",
        "the GPU shapes this model may run on ([shapes](shapes.md))",
    ),
    AnnotationSpec(
        SHAPE_ARGS_PREFIX + "<shape>",
        "",
        "flags, shell-quoted (`--max-model-len 16384 --gpu-memory-utilization=0.95`);"
        " only for a listed shape",
        "the container's arguments on that shape: each flag replaces the same flag's value,"
        " or is added",
    ),
    AnnotationSpec(
        SHAPE_ENV_PREFIX + "<shape>",
        "",
        "comma-separated `NAME=value`, names once; only for a listed shape",
        "the container's environment on that shape: each variable set or replaced",
    ),
    AnnotationSpec(
        SHAPE_PRICE_PREFIX + "<shape>",
        "",
        "`on-demand=<dollars>`, `spot=<dollars>` or both, comma-separated, each 0 or more;"
        " only for a listed shape",
        "this model's price per replica-hour on that shape, over the table's",
    ),
)

_SHAPE_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?")
_NAME_ALLOWED = "a lowercase name of letters, digits, '-' and '.', at most 32 characters"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_RATIO = 64.0
_T = TypeVar("_T")
_TABLE_FIELDS = (
    "resource",
    "count",
    "gpu-product",
    "select.<label>",
    "on-demand",
    "spot",
    "compute",
    "bandwidth",
    "memory",
)


@dataclass(frozen=True, slots=True)
class Prices:
    """Dollars per hour for one replica of a shape; ``spot`` None: not bought on spot."""

    on_demand: float
    spot: float | None = None


@dataclass(frozen=True, slots=True)
class Capacity:
    """What one replica of a shape is against the reference GPU (one H100 80GB)."""

    compute: float  # prefill
    bandwidth: float  # decode steps
    memory: float  # weights and KV cache


@dataclass(frozen=True, slots=True)
class Shape:
    """One row of the cluster's table."""

    name: str
    resource: str
    count: int
    node_selector: tuple[tuple[str, str], ...]
    prices: Prices
    capacity: Capacity


@dataclass(frozen=True, slots=True)
class ShapeTable:
    """The cluster's shapes by name (what parsed; see :func:`parse_shape_table`)."""

    shapes: Mapping[str, Shape]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", MappingProxyType(dict(self.shapes)))


@dataclass(frozen=True, slots=True)
class ChosenShape:
    """A shape a Deployment may run on, with its price and container overrides."""

    shape: Shape  # the table's, with the Deployment's prices when it states them
    args: tuple[str, ...] = ()  # flags and their values, in the annotation's order
    env: tuple[tuple[str, str], ...] = ()

    def flag(self, name: str) -> str | None:
        """The value its arguments give flag ``name`` (``--max-model-len 8192`` or
        ``--max-model-len=8192``), None when they do not set it."""
        for i, word in enumerate(self.args):
            if word == name and i + 1 < len(self.args):
                return self.args[i + 1]
            if word.startswith(name + "="):
                return word[len(name) + 1 :]
        return None

    @property
    def max_model_len(self) -> int | None:
        """vLLM's ``--max-model-len`` on this shape (None: not overridden): longer
        prompts are refused there."""
        value = self.flag("--max-model-len")
        return int(value) if value is not None and value.isdigit() else None


@dataclass(frozen=True, slots=True)
class ShapesReading:
    """What a Deployment's shape annotations say: the valid part and every problem."""

    shapes: tuple[ChosenShape, ...]
    problems: tuple[AnnotationProblem, ...]

    @property
    def error(self) -> InvalidAnnotation | None:
        """The one InvalidAnnotation naming every problem (None: no problem)."""
        return InvalidAnnotation.from_problems(self.problems) if self.problems else None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.shape.name for c in self.shapes)


def is_shape_key(key: str) -> bool:
    """Whether ``key`` is one of this module's Deployment annotations."""
    return key == SHAPES or key.startswith(_OVERRIDE_PREFIXES)


# --- the cluster's table -----------------------------------------------------------


class _Bad(Exception):
    """A field that does not parse; its message is what is allowed."""


def _number(low: float, high: float, allowed: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _Bad(allowed) from None
        if not low <= value <= high:  # also refuses nan
            raise _Bad(allowed)
        return value

    return parse


_PRICE = _number(0.0, 1e6, "dollars per hour, a number 0 or more")
_RATIO = _number(1e-6, _MAX_RATIO, f"a number above 0, up to {_MAX_RATIO:g}")


def _count(text: str) -> int:
    if not re.fullmatch(r"\d{1,2}", text) or not 1 <= int(text) <= 16:
        raise _Bad("an integer from 1 to 16")
    return int(text)


def _resource(text: str) -> str:
    prefix, slash, name = text.partition("/")
    if (
        not slash
        or len(prefix) > 253
        or not _DNS_SUBDOMAIN.fullmatch(prefix)
        or not _LABEL_NAME.fullmatch(name)
        or prefix == "kubernetes.io"
        or prefix.endswith((".kubernetes.io", "k8s.io"))
    ):
        raise _Bad(
            "an extended resource <domain>/<name> outside kubernetes.io, such as "
            "nvidia.com/gpu or nvidia.com/mig-3g.40gb"
        )
    return text


def _label_value(text: str) -> str:
    if text and not _LABEL_NAME.fullmatch(text):
        raise _Bad("a label value: at most 63 letters, digits, '-', '_' and '.'")
    return text


def _label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(_LABEL_NAME.fullmatch(name))


def _fields(text: str) -> tuple[dict[str, str], list[str]]:
    """``a=1, b=2`` as a mapping, and the items that are not ``field=value`` or repeat."""
    fields: dict[str, str] = {}
    bad: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, eq, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name or name in fields:
            bad.append(item)
            continue
        fields[name] = value
    return fields, bad


class _ShapeReader:
    """One table entry's fields, collecting problems keyed ``<shape> <field>``."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.fields, bad = _fields(text)
        self.problems = [
            AnnotationProblem(name, item, "comma-separated field=value, each field once")
            for item in bad
        ]

    def get(self, field: str, parse: Callable[[str], _T]) -> _T | None:
        """The parsed field, None when absent or bad (a bad one is recorded)."""
        text = self.fields.get(field)
        if text is None:
            return None
        try:
            return parse(text)
        except _Bad as exc:
            self.problems.append(AnnotationProblem(f"{self.name} {field}", text, str(exc)))
            return None

    def required(self, field: str, parse: Callable[[str], _T], allowed: str) -> _T | None:
        if field not in self.fields:
            self.problems.append(AnnotationProblem(f"{self.name} {field}", "", allowed))
            return None
        return self.get(field, parse)


def _capacity(r: _ShapeReader, resource: str, count: int, product: str | None) -> Capacity | None:
    known = device_for(product, resource) if product else None
    prior = (
        Capacity(
            known.compute_ratio * count, known.bandwidth_ratio * count, known.memory_ratio * count
        )
        if known is not None
        else None
    )
    values: dict[str, float] = {}
    for field in ("compute", "bandwidth", "memory"):
        if prior is None:
            allowed = (
                f"a number above 0, up to {_MAX_RATIO:g}; required when gpu-product and "
                "resource do not name a GPU or MIG profile the catalog knows"
            )
            value = r.required(field, _RATIO, allowed)
        else:
            value = r.get(field, _RATIO)
        if value is not None:
            values[field] = value
        elif prior is not None:
            values[field] = getattr(prior, field)
    return Capacity(**values) if len(values) == 3 else None


def _shape(name: str, text: str) -> tuple[Shape | None, list[AnnotationProblem]]:
    r = _ShapeReader(name, text)
    for field in r.fields:
        if field not in _TABLE_FIELDS and not field.startswith("select."):
            r.problems.append(
                AnnotationProblem(
                    f"{name} {field}", r.fields[field], "a field of " + ", ".join(_TABLE_FIELDS)
                )
            )
    resource = r.required("resource", _resource, "an extended resource, such as nvidia.com/gpu")
    count = r.get("count", _count) or 1
    product = r.get("gpu-product", _label_value)
    selector: dict[str, str] = {GPU_PRODUCT_LABEL: product} if product else {}
    for field, value in r.fields.items():
        key = field.removeprefix("select.")
        if field.startswith("select.") and r.get(field, _label_value) is not None:
            if _label_key(key):
                selector[key] = value
            else:
                r.problems.append(
                    AnnotationProblem(f"{name} {field}", value, "select.<label key>=<label value>")
                )
    on_demand = r.required("on-demand", _PRICE, "dollars per hour, a number 0 or more")
    spot = r.get("spot", _PRICE)
    capacity = _capacity(r, resource, count, product) if resource is not None else None
    if r.problems or resource is None or capacity is None or on_demand is None:
        return None, r.problems
    node_selector = tuple(sorted(selector.items()))
    return Shape(name, resource, count, node_selector, Prices(on_demand, spot), capacity), []


def parse_shape_table(data: Mapping[str, str]) -> tuple[ShapeTable, tuple[AnnotationProblem, ...]]:
    """The shapes of a ``tidal-shapes`` ConfigMap's ``data`` that parse, and every problem.

    A shape with any problem is left out of the table; the others stay.
    """
    shapes: dict[str, Shape] = {}
    problems: list[AnnotationProblem] = []
    for name, text in data.items():
        if not _SHAPE_NAME.fullmatch(name):
            problems.append(AnnotationProblem(name, text, f"a shape name: {_NAME_ALLOWED}"))
            continue
        shape, bad = _shape(name, text)
        problems.extend(bad)
        if shape is not None:
            shapes[name] = shape
    return ShapeTable(shapes), tuple(problems)


# --- a Deployment's choice ---------------------------------------------------------


def _flags(text: str) -> tuple[str, ...]:
    try:
        words = tuple(shlex.split(text))
    except ValueError:
        raise _Bad("flags, shell-quoted (a quote is not closed)") from None
    if not words or not words[0].startswith("-"):
        raise _Bad("flags, each --name value or --name=value, shell-quoted; at least one")
    return words


def _env(text: str) -> tuple[tuple[str, str], ...]:
    pairs, bad = _fields(text)
    if bad or not pairs or not all(_ENV_NAME.fullmatch(name) for name in pairs):
        raise _Bad(
            "comma-separated NAME=value (NAME of letters, digits and '_', not first a digit), "
            "each NAME once"
        )
    return tuple(pairs.items())


def _prices(text: str) -> dict[str, float]:
    pairs, bad = _fields(text)
    allowed = "on-demand=<dollars>, spot=<dollars> or both, comma-separated, each 0 or more"
    if bad or not pairs or set(pairs) - {"on-demand", "spot"}:
        raise _Bad(allowed)
    try:
        return {name: _PRICE(value) for name, value in pairs.items()}
    except _Bad:
        raise _Bad(allowed) from None


def _listed(
    annotations: Mapping[str, str], table: ShapeTable
) -> tuple[list[str], list[AnnotationProblem]]:
    text = annotations.get(SHAPES)
    if text is None:
        return [], []
    known = ", ".join(sorted(table.shapes)) or "none: the tidal-shapes table is empty or missing"
    names = [n.strip() for n in text.split(",") if n.strip()]
    problems = []
    if not names:
        problems.append(
            AnnotationProblem(SHAPES, text, f"one or more shapes of the table: {known}")
        )
    seen: set[str] = set()
    listed: list[str] = []
    for name in names:
        if name in seen:
            problems.append(AnnotationProblem(SHAPES, text, f"each shape once ({name} is twice)"))
        elif name not in table.shapes:
            problems.append(
                AnnotationProblem(SHAPES, text, f"shapes of the table ({name} is not one): {known}")
            )
        else:
            listed.append(name)
        seen.add(name)
    return listed, problems


def read_shapes(annotations: Mapping[str, str], table: ShapeTable) -> ShapesReading:
    """The shapes a Deployment may run on (module docstring), in its order, and every problem.

    No ``placement.tidal.dev/shapes``: no shapes (the Deployment's own
    template only). A listed name the table lacks is a problem and left out;
    an override of a shape not listed is a problem; a bad override leaves
    its shape without it.
    """
    listed, problems = _listed(annotations, table)
    args: dict[str, tuple[str, ...]] = {}
    env: dict[str, tuple[tuple[str, str], ...]] = {}
    prices: dict[str, dict[str, float]] = {}
    for key, value in annotations.items():
        prefix = next((p for p in _OVERRIDE_PREFIXES if key.startswith(p)), None)
        if prefix is None:
            continue
        name = key[len(prefix) :]
        if name not in listed:
            allowed = f"only for a shape in {SHAPES} ({', '.join(listed) or 'none listed'})"
            problems.append(AnnotationProblem(key, value, allowed))
            continue
        try:
            if prefix == SHAPE_ARGS_PREFIX:
                args[name] = _flags(value)
            elif prefix == SHAPE_ENV_PREFIX:
                env[name] = _env(value)
            else:
                prices[name] = _prices(value)
        except _Bad as exc:
            problems.append(AnnotationProblem(key, value, str(exc)))
    chosen = []
    for name in listed:
        shape = table.shapes[name]
        if name in prices:
            stated = prices[name]
            shape = replace(
                shape,
                prices=Prices(
                    stated.get("on-demand", shape.prices.on_demand),
                    stated.get("spot", shape.prices.spot),
                ),
            )
        chosen.append(ChosenShape(shape, args.get(name, ()), env.get(name, ())))
    return ShapesReading(tuple(chosen), tuple(problems))
