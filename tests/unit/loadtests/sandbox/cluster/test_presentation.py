"""Pure presentation helpers: ages, Tables, discovery and event conversion.

Covers: ``human_duration`` at its boundaries (as apimachinery prints ages);
pod STATUS/READY/RESTARTS cells for waiting, terminated and terminating
pods; Table ``includeObject`` modes and headerless watch tables; the Accept
headers that ask for Tables and aggregated discovery; events.k8s.io <-> core
Event conversion round trips and field-selector rewriting.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loadtests.sandbox.cluster.discovery import wants_aggregated
from loadtests.sandbox.cluster.events_conversion import (
    core_to_events,
    events_field_selector,
    events_to_core,
)
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.tables import human_duration, table_for, wants_table

PODS = by_group_version_plural("", "v1", "pods")
assert PODS
NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600, "8h"),
        (48 * 3600, "2d"),
        (49 * 3600, "2d1h"),
        (8 * 86400, "8d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def pod(status: dict[str, object], **meta: object) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "creationTimestamp": "2025-01-01T11:58:00Z", **meta},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": status,
    }


@pytest.mark.parametrize(
    ("status", "meta", "cells"),
    [
        pytest.param({"phase": "Pending"}, {}, ["p", "0/2", "Pending", "0", "2m"], id="pending"),
        pytest.param(
            {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "ready": True,
                        "restartCount": 1,
                        "state": {"running": {}},
                        "lastState": {"terminated": {"finishedAt": "2025-01-01T11:59:00Z"}},
                    },
                    {
                        "ready": False,
                        "restartCount": 2,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    },
                ],
            },
            {},
            ["p", "1/2", "CrashLoopBackOff", "3 (60s ago)", "2m"],
            id="crashloop",
        ),
        pytest.param(
            {
                "phase": "Running",
                "containerStatuses": [{"ready": True, "state": {"running": {}}}] * 2,
            },
            {"deletionTimestamp": "2025-01-01T12:00:00Z"},
            ["p", "2/2", "Terminating", "0", "2m"],
            id="terminating",
        ),
        pytest.param(
            {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]},
            {},
            ["p", "0/2", "ExitCode:3", "0", "2m"],
            id="exit-code",
        ),
    ],
)
def test_pod_cells(status: dict[str, object], meta: dict[str, object], cells: list[str]) -> None:
    assert PODS is not None
    table = table_for(PODS, [pod(status, **meta)], resource_version="1", now=NOW)
    assert table["rows"][0]["cells"][:5] == cells


def test_table_object_modes_and_headers() -> None:
    assert PODS is not None
    obj = pod({"phase": "Running"})
    meta_row = table_for(PODS, [obj], resource_version="1", now=NOW)["rows"][0]
    assert meta_row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }
    assert (
        table_for(PODS, [obj], resource_version="1", include_object="Object")["rows"][0]["object"]
        is obj
    )
    assert (
        "object"
        not in table_for(PODS, [obj], resource_version="1", include_object="None")["rows"][0]
    )
    assert table_for(PODS, [obj], resource_version="1", headers=False)["columnDefinitions"] is None


def test_accept_negotiation() -> None:
    assert wants_table(
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    )
    assert not wants_table("application/json")
    assert wants_aggregated(
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    )
    assert not wants_aggregated(
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    )
    assert not wants_aggregated("application/json, */*")


def test_event_conversion_round_trip() -> None:
    core = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": "e", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "message": "hi",
        "reason": "R",
        "source": {"component": "kubelet", "host": "n1"},
        "count": 3,
        "reportingComponent": "kubelet",
        "reportingInstance": "n1",
        "type": "Warning",
        "series": {
            "count": 2,
            "lastObservedTime": "2025-01-01T00:00:00.000000Z",
            "state": "Ongoing",
        },
    }
    new = core_to_events(core)
    assert new["apiVersion"] == "events.k8s.io/v1"
    assert new["note"] == "hi" and new["regarding"] == {"kind": "Pod", "name": "p"}
    assert new["deprecatedSource"] == {"component": "kubelet", "host": "n1"}
    assert new["deprecatedCount"] == 3 and new["reportingController"] == "kubelet"
    assert "state" not in new["series"]
    back = events_to_core(new)
    assert back == {**core, "series": {k: v for k, v in core["series"].items() if k != "state"}}
    assert events_field_selector("regarding.name=p,reportingController=k,type=Normal") == (
        "involvedObject.name=p,reportingComponent=k,type=Normal"
    )
