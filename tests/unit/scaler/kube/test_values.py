"""Kubernetes objects -> our values, selectors, and the error translation.

Covers:
- Deployments from raw JSON: omitted ``spec.replicas`` defaults to 1, ready
  replicas, selectors with expressions, GPUs per replica;
- pods: readiness from the Ready condition, terminating, named ports,
  pod-deletion-cost; and what placement needs: node, phase, creation time,
  eviction (reason Evicted or a DisruptionTarget condition), GPUs;
- label selectors (In/NotIn/Exists/DoesNotExist; an empty selector matches nothing);
- kubernetes_asyncio and aiohttp exceptions -> NotFound, Conflict, Gone,
  Rejected, ApiUnavailable, with the original chained and the Status message kept.
"""

from __future__ import annotations

import json

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from groundwork.kube.errors import (
    ApiUnavailable,
    Conflict,
    Gone,
    KubeError,
    NotFound,
    Rejected,
    translate,
)
from scaler.kube.objects import deployment_from_raw, pod_from_raw
from scaler.kube.types import LabelRequirement, LabelSelector


def test_deployment_from_raw() -> None:
    d = deployment_from_raw(
        {
            "metadata": {
                "namespace": "ml",
                "name": "llama",
                "uid": "u1",
                "resourceVersion": "7",
                "annotations": {"autoscaling.tidal.dev/max-scale": "4"},
            },
            "spec": {
                "selector": {
                    "matchLabels": {"app": "llama"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}],
                },
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
                            {"name": "b", "resources": {"requests": {"nvidia.com/gpu": 1}}},
                        ]
                    }
                },
            },
            "status": {"readyReplicas": 0},
        }
    )
    assert d.key == "ml/llama"
    assert d.spec_replicas == 1  # omitted replicas default to 1, as apps/v1 does
    assert d.gpus_per_replica == 3
    assert d.selector.matches({"app": "llama", "tier": "gpu"})
    assert not d.selector.matches({"app": "llama", "tier": "cpu"})
    assert (
        deployment_from_raw({"metadata": {"name": "x"}, "spec": {"replicas": 0}}).spec_replicas == 0
    )


def test_pod_from_raw() -> None:
    p = pod_from_raw(
        {
            "metadata": {
                "namespace": "ml",
                "name": "llama-1",
                "labels": {"app": "llama"},
                "annotations": {"controller.kubernetes.io/pod-deletion-cost": "-5"},
                "deletionTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"containers": [{"ports": [{"name": "metrics", "containerPort": 9400}]}]},
            "status": {"podIP": "10.1.2.3", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    assert (p.ready, p.terminating, p.ip, p.deletion_cost) == (True, True, "10.1.2.3", -5)
    assert (p.port("metrics"), p.port(8000), p.port("8001"), p.port("nope")) == (
        9400,
        8000,
        8001,
        None,
    )
    unready = pod_from_raw(
        {
            "metadata": {"name": "x"},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        }
    )
    assert not unready.ready
    assert unready.ip is None


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        pytest.param(LabelRequirement("a", "In", ("1", "2")), {"a": "2"}, True, id="in"),
        pytest.param(LabelRequirement("a", "In", ("1",)), {}, False, id="in-missing"),
        pytest.param(LabelRequirement("a", "NotIn", ("1",)), {}, True, id="notin-missing"),
        pytest.param(LabelRequirement("a", "Exists"), {"a": ""}, True, id="exists"),
        pytest.param(LabelRequirement("a", "DoesNotExist"), {"a": "x"}, False, id="doesnotexist"),
        pytest.param(LabelRequirement("a", "Weird"), {"a": "x"}, False, id="unknown-op"),
    ],
)
def test_label_requirements(
    requirement: LabelRequirement, labels: dict[str, str], expected: bool
) -> None:
    assert LabelSelector(match_expressions=(requirement,)).matches(labels) is expected


def test_empty_selector_matches_nothing() -> None:
    assert not LabelSelector().matches({"app": "x"})


def _api_error(status: int, message: str = "boom") -> ApiException:
    e = ApiException(status=status, reason="Reason")
    e.body = json.dumps({"kind": "Status", "code": status, "message": message})
    return e


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        pytest.param(_api_error(404), NotFound, id="404"),
        pytest.param(_api_error(409), Conflict, id="409"),
        pytest.param(_api_error(410), Gone, id="410"),
        pytest.param(_api_error(403), Rejected, id="403"),
        pytest.param(_api_error(422), Rejected, id="422"),
        pytest.param(_api_error(429), ApiUnavailable, id="429"),
        pytest.param(_api_error(503), ApiUnavailable, id="503"),
        pytest.param(aiohttp.ClientConnectionError("refused"), ApiUnavailable, id="connection"),
        pytest.param(TimeoutError(), ApiUnavailable, id="timeout"),
        pytest.param(RuntimeError("odd"), KubeError, id="other"),
    ],
)
def test_translate(exc: BaseException, kind: type[KubeError]) -> None:
    def call() -> None:
        try:
            raise exc
        except BaseException as e:
            raise translate(e, doing="patch thing") from e

    with pytest.raises(kind) as info:
        call()
    assert type(info.value) is kind
    assert info.value.__cause__ is exc
    assert "patch thing" in str(info.value)
    if isinstance(exc, ApiException):
        assert "boom" in str(info.value)


def test_pod_from_raw_placement_facts() -> None:
    p = pod_from_raw(
        {
            "metadata": {"name": "llama-spot-1", "creationTimestamp": "2026-01-01T00:00:10Z"},
            "spec": {
                "nodeName": "gpu-spot-1",
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}],
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "DisruptionTarget", "status": "True"}],
            },
        }
    )
    assert (p.node, p.phase, p.evicted, p.gpus) == ("gpu-spot-1", "Running", True, 2)
    assert p.created_at == 1767225610.0
    pending = pod_from_raw({"metadata": {"name": "x"}, "status": {"reason": "Evicted"}})
    assert (pending.node, pending.phase, pending.evicted, pending.created_at) == (
        None,
        "Pending",
        True,
        0.0,
    )
