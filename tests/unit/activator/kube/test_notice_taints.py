"""The activator on an interruption notice: which nodes, which endpoints, which keys.

Covers the pure parts: nodes carrying a notice taint (any value, any effect;
other taints ignored); their endpoints become draining (never ready, kept
so in-flight requests finish) while endpoints elsewhere are untouched;
build_targets passes the set through; the activator's default keys are
exactly the scaler's provider presets' keys (the activator cannot import
the scaler, so the two lists are kept in step by this test); the setting's
parsing and its error.
"""

from __future__ import annotations

from typing import Any

import pytest

from activator.kube.notice_taints import (
    DEFAULT_NOTICE_TAINTS,
    nodes_under_notice,
    parse_notice_taints,
)
from activator.kube.translate import build_targets, endpoints_from_slices
from activator.settings import ActivatorSettings
from activator.targets import Endpoint
from groundwork.settings_loading import load_settings
from scaler.placement.settings import PlacementSettings
from scaler.policy.placement.providers import PRESETS


def node(name: str, *taints: tuple[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"taints": [{"key": k, "effect": e, "value": "x"} for k, e in taints]},
    }


def test_nodes_under_notice_by_taint_key() -> None:
    nodes = [
        node("spot-1", ("karpenter.sh/disrupted", "NoSchedule")),
        node("spot-2", ("aws-node-termination-handler/spot-itn", "NoExecute")),
        node("spot-3", ("node.kubernetes.io/unschedulable", "NoSchedule")),  # cordon only
        node("od-1"),
        {"metadata": {"name": "bare"}},  # no spec at all
    ]
    assert nodes_under_notice(nodes, DEFAULT_NOTICE_TAINTS) == {"spot-1", "spot-2"}
    assert nodes_under_notice(nodes, ["karpenter.sh/disrupted"]) == {"spot-1"}
    assert nodes_under_notice(nodes, []) == frozenset()


def slice_of(*endpoints: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "llama-abc",
            "namespace": "ml",
            "labels": {"kubernetes.io/service-name": "llama"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8000}],
        "endpoints": list(endpoints),
    }


def ep(ip: str, pod: str, node_name: str | None, **conditions: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "addresses": [ip],
        "conditions": conditions,
        "targetRef": {"kind": "Pod", "name": pod},
    }
    if node_name is not None:
        out["nodeName"] = node_name
    return out


SLICE = slice_of(
    ep("10.0.0.1", "on-demand", "od-1", ready=True),
    ep("10.0.0.2", "spot-a", "spot-1", ready=True, serving=True),
    ep("10.0.0.3", "spot-b", "spot-2", ready=True),
    ep("10.0.0.4", "spot-c", "spot-1", ready=False),  # still loading on the noticed node
    ep("10.0.0.5", "unplaced", None, ready=False),
)


def test_endpoints_on_a_noticed_node_drain_and_the_rest_do_not() -> None:
    before = endpoints_from_slices([SLICE], port="http")
    assert [e.name for e in before if e.ready] == ["on-demand", "spot-a", "spot-b"]
    assert not any(e.draining for e in before)
    after = endpoints_from_slices([SLICE], port="http", nodes_under_notice=frozenset({"spot-1"}))
    assert after == (
        Endpoint("10.0.0.1", 8000, name="on-demand", ready=True),
        Endpoint("10.0.0.2", 8000, name="spot-a", ready=False, draining=True),
        Endpoint("10.0.0.3", 8000, name="spot-b", ready=True),
        Endpoint("10.0.0.4", 8000, name="spot-c", ready=False, draining=True),
        Endpoint("10.0.0.5", 8000, name="unplaced", ready=False),
    )


def test_build_targets_drains_endpoints_on_noticed_nodes() -> None:
    deployment = {
        "metadata": {
            "name": "llama",
            "namespace": "ml",
            "labels": {"autoscaling.tidal.dev/enabled": "true"},
        }
    }
    targets, problems = build_targets(
        [deployment], {}, [SLICE], nodes_under_notice=frozenset({"spot-1", "spot-2"})
    )
    assert problems == []
    ready = [e.name for e in targets["ml/llama"].endpoints if e.ready]
    assert ready == ["on-demand"]
    draining = [e.name for e in targets["ml/llama"].endpoints if e.draining]
    assert draining == ["spot-a", "spot-b", "spot-c"]


def test_default_keys_are_the_scaler_presets_keys() -> None:
    presets = {key for p in PRESETS.values() for key in p.notice_taints}
    assert set(DEFAULT_NOTICE_TAINTS) == presets
    # The scaler's default provider's keys are among them.
    assert set(PlacementSettings().preset().notice_taints) <= set(DEFAULT_NOTICE_TAINTS)
    assert load_settings(ActivatorSettings).notice_taints.split(",") == list(DEFAULT_NOTICE_TAINTS)


def test_notice_taints_setting() -> None:
    assert parse_notice_taints(" example.com/going , karpenter.sh/disrupted,,") == (
        "example.com/going",
        "karpenter.sh/disrupted",
    )
    assert parse_notice_taints("") == ()
    assert load_settings(ActivatorSettings, flags={"notice_taints": ""}).notice_taints == ""
    with pytest.raises(ValueError, match=r"'example\.com/going=yes' is not a taint key"):
        load_settings(
            ActivatorSettings,
            flags={"notice_taints": "karpenter.sh/disrupted,example.com/going=yes"},
        )
