"""The example manifests in deploy/examples/ are usable as they stand.

Covers: every opted-in Deployment's annotations parse into a config (no
InvalidAnnotation), a Deployment behind an opted-in InferencePool with the
pool's annotations under its own, as the scaler reads them; the spot
example asks for spot-with-on-demand-baseline with a baseline of one; every
Service's and pool's selector selects its Deployment's pods (one pool for
both halves of a spot pair); the pool example's picker settings parse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.policy import parse_scaling_config
from scaler.policy.pool_annotations import merge, read_picker

EXAMPLES = sorted((Path(__file__).parents[2] / "deploy" / "examples").glob("*.yaml"))


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_parses(path: Path) -> None:
    docs = documents(path)
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    pools = [d for d in docs if d["kind"] == "InferencePool"]
    assert deployments
    for d in deployments:
        annotations = d["metadata"].get("annotations") or {}
        pod_labels = d["spec"]["template"]["metadata"]["labels"]
        if pools:
            (pool,) = pools
            assert pool["metadata"]["labels"]["autoscaling.tidal.dev/enabled"] == "true"
            assert pool["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
            annotations = merge(pool["metadata"]["annotations"], annotations).annotations
        else:
            assert d["metadata"]["labels"]["autoscaling.tidal.dev/enabled"] == "true"
        parse_scaling_config(annotations)
        for service in (s for s in docs if s["kind"] == "Service"):
            assert service["spec"]["selector"].items() <= pod_labels.items()


def test_the_pool_example_says_its_pickers_ttl() -> None:
    (path,) = [p for p in EXAMPLES if p.name == "inferencepool-llama.yaml"]
    (pool,) = [d for d in documents(path) if d["kind"] == "InferencePool"]
    picker, problems = read_picker(
        pool["metadata"]["annotations"], namespace="default", picker=("llama-epp", 9002)
    )
    assert problems == ()
    assert (picker.no_endpoint_ttl_s, picker.ttl_said) == (600.0, True)


def test_spot_example_is_there() -> None:
    (path,) = [p for p in EXAMPLES if p.name == "vllm-llama-spot.yaml"]
    (deployment,) = [d for d in documents(path) if d["kind"] == "Deployment"]
    placement = parse_scaling_config(deployment["metadata"]["annotations"]).placement
    assert placement.policy == "spot-with-on-demand-baseline"
    assert placement.on_demand_baseline == 1
