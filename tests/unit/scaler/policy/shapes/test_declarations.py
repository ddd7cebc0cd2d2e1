"""GPU shapes: the cluster's table and a Deployment's choice, valid and invalid.

Covers: table entries that parse (whole GPUs, a count, a MIG profile, extra
selector labels, a spot price or none) with their capacity prior taken from
the GPU catalog times the count, or stated, or stated over the catalog's;
entries that do not, each problem naming the shape and field, the value and
what is allowed, the rest of the table kept; a Deployment's shape list with
its args, env and price overrides, in its order; every problem of a
Deployment's shape annotations in one InvalidAnnotation, the valid part
kept; no shapes annotation means no shapes; the keys the module owns.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from groundwork.gpu_catalog import device
from scaler.policy.annotations import InvalidAnnotation
from scaler.policy.shapes.declarations import (
    Capacity,
    ChosenShape,
    Prices,
    ShapeTable,
    is_shape_key,
    parse_shape_table,
    read_shapes,
)

H100 = "NVIDIA-H100-80GB-HBM3"
TABLE_DATA = {
    "h100": f"resource=nvidia.com/gpu, gpu-product={H100}, on-demand=12.29, spot=3.69",
    "mig-3g.40gb": f"resource=nvidia.com/mig-3g.40gb, gpu-product={H100}, on-demand=5.27",
    "l4": "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=0.80, spot=0.24",
}


def table() -> ShapeTable:
    parsed, problems = parse_shape_table(TABLE_DATA)
    assert problems == ()
    return parsed


def test_a_whole_gpu_shape() -> None:
    shape = table().shapes["h100"]
    assert (shape.resource, shape.count) == ("nvidia.com/gpu", 1)
    assert shape.node_selector == (("nvidia.com/gpu.product", H100),)
    assert shape.prices == Prices(12.29, 3.69)
    assert shape.capacity == Capacity(1.0, 1.0, 1.0)


def test_a_mig_shape_takes_its_prior_from_the_catalog_and_has_no_spot() -> None:
    shape = table().shapes["mig-3g.40gb"]
    dev = device(f"{H100}-MIG-3g.40gb")
    assert shape.capacity == Capacity(dev.compute_ratio, dev.bandwidth_ratio, dev.memory_ratio)
    assert shape.prices == Prices(5.27, None)


@pytest.mark.parametrize(
    ("text", "count", "selector", "capacity"),
    [
        pytest.param(
            "resource=nvidia.com/gpu, count=2, gpu-product=NVIDIA-L4, on-demand=1.6",
            2,
            (("nvidia.com/gpu.product", "NVIDIA-L4"),),
            Capacity(2 * 121 / 989.5, 2 * 300 / 3350, 2 * 23_034 / 81_559),
            id="count-times-the-prior",
        ),
        pytest.param(
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=0.8, compute=0.2",
            1,
            (("nvidia.com/gpu.product", "NVIDIA-L4"),),
            Capacity(0.2, 300 / 3350, 23_034 / 81_559),
            id="stated-over-the-catalog",
        ),
        pytest.param(
            "resource=example.com/accel, select.example.com/pool=a, select.zone=b, on-demand=3,"
            " compute=0.5, bandwidth=0.4, memory=0.3",
            1,
            (("example.com/pool", "a"), ("zone", "b")),
            Capacity(0.5, 0.4, 0.3),
            id="unknown-device-stated",
        ),
    ],
)
def test_table_entries_that_parse(
    text: str, count: int, selector: tuple[tuple[str, str], ...], capacity: Capacity
) -> None:
    parsed, problems = parse_shape_table({"s": text})
    assert problems == ()
    shape = parsed.shapes["s"]
    assert (shape.count, shape.node_selector) == (count, selector)
    assert shape.capacity.compute == pytest.approx(capacity.compute)
    assert shape.capacity.bandwidth == pytest.approx(capacity.bandwidth)
    assert shape.capacity.memory == pytest.approx(capacity.memory)


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        pytest.param(
            "s",
            "gpu-product=NVIDIA-L4, on-demand=1",
            's resource: "" is not allowed',
            id="resource",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4",
            's on-demand: "" is not allowed; allowed: dollars per hour',
            id="no-price",
        ),
        pytest.param(
            "s",
            "resource=gpu, gpu-product=NVIDIA-L4, on-demand=1",
            's resource: "gpu" is not allowed; allowed: an extended resource <domain>/<name>',
            id="unqualified-resource",
        ),
        pytest.param(
            "s",
            "resource=kubernetes.io/gpu, gpu-product=NVIDIA-L4, on-demand=1",
            's resource: "kubernetes.io/gpu" is not allowed; allowed: an extended resource'
            " <domain>/<name> outside kubernetes.io",
            id="kubernetes-io",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, count=0, gpu-product=NVIDIA-L4, on-demand=1",
            's count: "0" is not allowed; allowed: an integer from 1 to 16',
            id="count",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=-1",
            's on-demand: "-1" is not allowed; allowed: dollars per hour, a number 0 or more',
            id="negative-price",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=1, spot=nan",
            's spot: "nan" is not allowed',
            id="nan-spot",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-T4, on-demand=1",
            's compute: "" is not allowed; allowed: a number above 0, up to 64; required when',
            id="unknown-device-needs-ratios",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=1, memory=0",
            's memory: "0" is not allowed; allowed: a number above 0, up to 64',
            id="zero-ratio",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=1, price=2",
            's price: "2" is not allowed; allowed: a field of resource, count, gpu-product',
            id="unknown-field",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=1, on-demand=2",
            's: "on-demand=2" is not allowed; allowed: comma-separated field=value,'
            " each field once",
            id="repeated-field",
        ),
        pytest.param(
            "s",
            "resource=nvidia.com/gpu, select.bad key=x, on-demand=1, compute=1, bandwidth=1,"
            " memory=1",
            's select.bad key: "x" is not allowed; allowed: select.<label key>=<label value>',
            id="bad-label-key",
        ),
        pytest.param(
            "H100",
            "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=1",
            'H100: "resource=nvidia.com/gpu, gpu-product=NVIDIA-L4, on-demand=1" is not allowed;'
            " allowed: a shape name: a lowercase name",
            id="shape-name",
        ),
    ],
)
def test_table_entries_that_do_not_parse_are_left_out(name: str, text: str, problem: str) -> None:
    parsed, problems = parse_shape_table({**TABLE_DATA, name: text})
    assert name not in parsed.shapes
    assert set(parsed.shapes) == set(TABLE_DATA)  # the rest of the table stays
    assert any(str(p).startswith(problem) for p in problems), [str(p) for p in problems]


def test_a_deployments_shapes_in_its_order_with_their_overrides() -> None:
    reading = read_shapes(
        {
            "placement.tidal.dev/shapes": " l4, mig-3g.40gb ,h100",
            "placement.tidal.dev/shape-args.mig-3g.40gb": "--max-model-len 16384 "
            "--gpu-memory-utilization=0.95 --enforce-eager",
            "placement.tidal.dev/shape-env.l4": "VLLM_ATTENTION_BACKEND=FLASHINFER, A_B=x=y",
            "placement.tidal.dev/shape-price.l4": "spot=0.2",
            "placement.tidal.dev/shape-price.h100": "on-demand=10, spot=3",
            "autoscaling.tidal.dev/max-scale": "3",
        },
        table(),
    )
    assert reading.problems == () and reading.error is None
    assert reading.names == ("l4", "mig-3g.40gb", "h100")
    l4, mig, h100 = reading.shapes
    assert l4.env == (("VLLM_ATTENTION_BACKEND", "FLASHINFER"), ("A_B", "x=y"))
    assert l4.shape.prices == Prices(0.80, 0.2)
    assert mig.args == (
        "--max-model-len",
        "16384",
        "--gpu-memory-utilization=0.95",
        "--enforce-eager",
    )
    assert h100 == ChosenShape(replace(table().shapes["h100"], prices=Prices(10.0, 3.0)))


def test_no_shapes_annotation_means_no_shapes() -> None:
    reading = read_shapes({"autoscaling.tidal.dev/min-scale": "1"}, table())
    assert (reading.shapes, reading.problems) == ((), ())


@pytest.mark.parametrize(
    ("annotations", "problem"),
    [
        pytest.param(
            {"placement.tidal.dev/shapes": "h100,a100"},
            'placement.tidal.dev/shapes: "h100,a100" is not allowed; allowed: shapes of the table'
            " (a100 is not one): h100, l4, mig-3g.40gb",
            id="unknown-shape",
        ),
        pytest.param(
            {"placement.tidal.dev/shapes": "h100,h100"},
            "each shape once (h100 is twice)",
            id="twice",
        ),
        pytest.param(
            {"placement.tidal.dev/shapes": " , "},
            "one or more shapes of the table",
            id="empty",
        ),
        pytest.param(
            {"placement.tidal.dev/shapes": "h100", "placement.tidal.dev/shape-args.l4": "--x 1"},
            'placement.tidal.dev/shape-args.l4: "--x 1" is not allowed; allowed: only for a shape'
            " in placement.tidal.dev/shapes (h100)",
            id="override-of-an-unlisted-shape",
        ),
        pytest.param(
            {"placement.tidal.dev/shapes": "h100", "placement.tidal.dev/shape-args.h100": "16384"},
            "allowed: flags, each --name value or --name=value, shell-quoted; at least one",
            id="args-without-a-flag",
        ),
        pytest.param(
            {"placement.tidal.dev/shapes": "h100", "placement.tidal.dev/shape-args.h100": "--a 'b"},
            "a quote is not closed",
            id="args-quote",
        ),
        pytest.param(
            {"placement.tidal.dev/shapes": "h100", "placement.tidal.dev/shape-env.h100": "1X=2"},
            "allowed: comma-separated NAME=value",
            id="env-name",
        ),
        pytest.param(
            {"placement.tidal.dev/shapes": "h100", "placement.tidal.dev/shape-env.h100": "A=1,A=2"},
            "each NAME once",
            id="env-twice",
        ),
        pytest.param(
            {"placement.tidal.dev/shapes": "h100", "placement.tidal.dev/shape-price.h100": "3"},
            "allowed: on-demand=<dollars>, spot=<dollars> or both",
            id="price-without-a-name",
        ),
        pytest.param(
            {
                "placement.tidal.dev/shapes": "h100",
                "placement.tidal.dev/shape-price.h100": "spot=-1",
            },
            "each 0 or more",
            id="negative-price",
        ),
    ],
)
def test_bad_shape_annotations(annotations: dict[str, str], problem: str) -> None:
    reading = read_shapes(annotations, table())
    error = reading.error
    assert isinstance(error, InvalidAnnotation)
    assert problem in str(error), str(error)


def test_every_problem_in_one_error_and_the_valid_part_kept() -> None:
    reading = read_shapes(
        {
            "placement.tidal.dev/shapes": "h100,nope,l4",
            "placement.tidal.dev/shape-env.l4": "bad name=1",
            "placement.tidal.dev/shape-args.h100": "--max-model-len 8192",
        },
        table(),
    )
    assert reading.error is not None
    assert reading.error.keys == ("placement.tidal.dev/shapes", "placement.tidal.dev/shape-env.l4")
    assert reading.names == ("h100", "l4")  # a model goes on with what was declared well
    assert reading.shapes[0].args == ("--max-model-len", "8192")
    assert reading.shapes[1].env == ()


@pytest.mark.parametrize(
    ("key", "owned"),
    [
        ("placement.tidal.dev/shapes", True),
        ("placement.tidal.dev/shape-args.l4", True),
        ("placement.tidal.dev/shape-env.l4", True),
        ("placement.tidal.dev/shape-price.l4", True),
        ("placement.tidal.dev/shape", False),
        ("placement.tidal.dev/policy", False),
    ],
)
def test_the_keys_this_module_owns(key: str, owned: bool) -> None:
    assert is_shape_key(key) is owned
