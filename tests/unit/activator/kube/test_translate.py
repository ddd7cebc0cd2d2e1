"""Kubernetes objects into targets (:mod:`activator.kube.translate`).

Covers: Deployment annotations and EndpointSlices translated into targets
(ready, terminating, port by name or number, invalid annotations reported
and defaulted); build_targets joins the kinds.
"""

from __future__ import annotations

from typing import Any

from activator.kube.translate import build_targets, endpoints_from_slices, target_from_deployment
from activator.targets import Endpoint


def deployment(name: str = "llama", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"autoscaling.tidal.dev/enabled": "true"},
            "annotations": {
                f"routing.tidal.dev/{k.replace('_', '-')}": v for k, v in annotations.items()
            },
        }
    }


SERVICE = {
    "metadata": {"name": "llama-svc", "namespace": "ml"},
    "spec": {"ports": [{"name": "metrics", "port": 9000}, {"name": "http", "port": 80}]},
}


def endpoint_slice(*endpoints: dict[str, Any], service: str = "llama-svc") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{service}-abc",
            "namespace": "ml",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "metrics", "port": 9000}, {"name": "http", "port": 8000}],
        "endpoints": list(endpoints),
    }


def ep(ip: str, pod: str, **conditions: bool) -> dict[str, Any]:
    return {
        "addresses": [ip],
        "conditions": conditions,
        "targetRef": {"kind": "Pod", "name": pod, "namespace": "ml"},
    }


def test_deployment_annotations_translate() -> None:
    routing = target_from_deployment(
        deployment(
            hosts="a.example.com, *.b.example.com",
            models="m1,m2",
            path_prefix="/llama",
            cold_start_timeout="2m",
            max_buffered="50",
            container_concurrency="4",
            service="llama-svc",
            port="http",
            resend_unanswered="False",
            default_priority="Sheddable",
            shed_at_zero="true",
        )
    )
    assert routing.problems == ()
    assert (routing.spec.default_priority, routing.spec.shed_at_zero) == (-1, True)
    assert routing.spec.resend_unanswered is False
    s = routing.spec
    assert s.name == "ml/llama"
    assert s.hosts == ("a.example.com", "*.b.example.com")
    assert s.models == ("m1", "m2")
    assert s.cold_start_timeout_s == 120
    assert (s.max_buffered, s.container_concurrency) == (50, 4)
    assert (routing.service, routing.port) == ("llama-svc", "http")
    bad = target_from_deployment(
        deployment(
            max_buffered="lots",
            cold_start_timeout="3h",
            resend_unanswered="no",
            default_priority="urgent",
        )
    )
    assert bad.spec.default_priority == 0
    assert bad.spec.max_buffered == 1000
    assert bad.spec.cold_start_timeout_s == 600
    assert bad.spec.resend_unanswered is True
    assert bad.service == "llama"
    # Each problem names the target, the key, the value and what is allowed.
    problems = "\n".join(bad.problems)
    assert len(bad.problems) == 4
    priority = 'routing.tidal.dev/default-priority: "urgent" is not allowed; allowed: critical'
    assert f"ml/llama: {priority}" in problems
    assert 'routing.tidal.dev/max-buffered: "lots" is not allowed' in problems
    assert (
        'routing.tidal.dev/resend-unanswered: "no" is not allowed; allowed: true or false'
        in problems
    )
    cold = 'cold-start-timeout: "3h" is not allowed; allowed: a duration from 1s to 1h'
    assert f"routing.tidal.dev/{cold}" in problems


def test_endpoint_slices_translate() -> None:
    sl = endpoint_slice(
        ep("10.0.0.1", "p1", ready=True),
        ep("10.0.0.2", "p2", ready=False),
        ep("10.0.0.3", "p3", ready=False, terminating=True),
        ep("10.0.0.4", "p4"),  # no condition: ready
        ep("10.0.0.5", "p5", ready=False, serving=True),  # terminating, not said so
    )
    by_name = endpoints_from_slices([sl], port="http")
    # Terminating endpoints are kept as draining (their in-flight requests
    # stay counted), never ready; before issue 13 they were dropped.
    assert by_name == (
        Endpoint("10.0.0.1", 8000, name="p1", ready=True),
        Endpoint("10.0.0.2", 8000, name="p2", ready=False),
        Endpoint("10.0.0.3", 8000, name="p3", ready=False, draining=True),
        Endpoint("10.0.0.4", 8000, name="p4", ready=True),
        Endpoint("10.0.0.5", 8000, name="p5", ready=False, draining=True),
    )
    routable = tuple(e for e in by_name if not e.draining)
    assert [e.name for e in routable] == ["p1", "p2", "p4"]
    # A Service port number maps to its name, then to the slice's target port.
    assert endpoints_from_slices([sl], port=80, service=SERVICE) == by_name
    # Default: the Service's first port.
    assert {e.port for e in endpoints_from_slices([sl], port=None, service=SERVICE)} == {9000}
    assert endpoints_from_slices([sl], port="grpc") == ()


def test_build_targets_joins_kinds() -> None:
    deps = [
        deployment(service="llama-svc", port="http"),
        {**deployment("off"), "metadata": {**deployment("off")["metadata"], "labels": {}}},
    ]
    sl = endpoint_slice(ep("10.0.0.1", "p1", ready=True))
    targets, problems = build_targets(deps, {"ml/llama-svc": SERVICE}, [sl])
    assert list(targets) == ["ml/llama"]
    assert problems == []
    assert targets["ml/llama"].endpoints == (Endpoint("10.0.0.1", 8000, name="p1", ready=True),)
