"""The InferencePool custom resource, served from its bundled CRD, with kubectl and raw HTTP.

Covers: discovery (``api-resources`` lists ``inferencepools`` with its short
name; aggregated discovery gives its ``status`` subresource);
``/openapi/v3`` publishes the kind under its OpenAPI name with no strategic
merge patch (so kubectl applies with a JSON merge patch, as on a real
cluster); ``kubectl apply -f`` creates then configures a pool, with the
schema's defaults filled; ``kubectl get`` shows the real server's default
columns (NAME, AGE) by short name; ``kubectl explain`` shows the CRD's
field descriptions; strict field validation refuses an
unknown field with 400; invalid values (a bound, an enum, both CRD rules)
with 422 worded as the real server words them; a strategic merge patch is
415; the ``status`` subresource keeps spec and status apart and bumps no
generation; a watch from a list's version sees a change.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from .conftest import Api, KubectlResult

Kubectl = Callable[..., Any]

POOLS = "/apis/inference.networking.k8s.io/v1/namespaces/default/inferencepools"

POOL = """
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata:
  name: llama
spec:
  selector:
    matchLabels: {app: llama}
  targetPorts:
  - number: PORT
  endpointPickerRef:
    name: llama-epp
    port: {number: 9002}
"""


def pool(name: str = "llama", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": f"{name}-epp", "port": {"number": 9002}},
        },
    }
    body["spec"].update(spec)
    return body


def ok(result: KubectlResult) -> str:
    assert result.code == 0, f"kubectl failed ({result.code}): {result.err}"
    return result.out


async def test_discovery_lists_the_kind_with_its_short_name(kubectl: Kubectl, api: Api) -> None:
    out = ok(await kubectl("api-resources", "--api-group=inference.networking.k8s.io"))
    row = next(line.split() for line in out.splitlines() if line.startswith("inferencepools"))
    assert row == [
        "inferencepools",
        "infpool",
        "inference.networking.k8s.io/v1",
        "true",
        "InferencePool",
    ]
    aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    status, body, _ = await api.call("GET", "/apis", accept=aggregated)
    assert status == 200
    group = next(g for g in body["items"] if g["metadata"]["name"] == "inference.networking.k8s.io")
    (resource,) = group["versions"][0]["resources"]
    assert resource["resource"] == "inferencepools"
    assert [s["subresource"] for s in resource["subresources"]] == ["status"]


async def test_openapi_has_the_schema_and_no_strategic_merge_patch(api: Api) -> None:
    status, root, _ = await api.call("GET", "/openapi/v3")
    assert status == 200
    url = root["paths"]["apis/inference.networking.k8s.io/v1"]["serverRelativeURL"]
    status, doc, _ = await api.call("GET", url)
    assert status == 200
    schema = doc["components"]["schemas"]["io.k8s.networking.inference.v1.InferencePool"]
    assert schema["properties"]["spec"]["required"] == ["selector", "targetPorts"]
    patch = doc["paths"][POOLS.replace("default", "{namespace}") + "/{name}"]["patch"]
    content = set(patch["requestBody"]["content"])
    assert "application/merge-patch+json" in content
    assert "application/strategic-merge-patch+json" not in content
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])


async def test_apply_creates_then_configures_and_get_shows_name_and_age(
    kubectl: Kubectl,
) -> None:
    result = await kubectl("apply", "-f", "-", stdin=POOL.replace("PORT", "8000"))
    assert "inferencepool.inference.networking.k8s.io/llama created" in ok(result)
    result = await kubectl("apply", "-f", "-", stdin=POOL.replace("PORT", "8080"))
    assert "inferencepool.inference.networking.k8s.io/llama configured" in ok(result)
    assert "warning" not in result.err.lower(), result.err
    obj = json.loads(ok(await kubectl("get", "infpool", "llama", "-o", "json")))
    assert obj["spec"]["targetPorts"] == [{"number": 8080}]
    assert obj["metadata"]["generation"] == 2
    # The schema's defaults, filled by the server.
    assert obj["spec"]["appProtocol"] == "http"
    assert obj["spec"]["endpointPickerRef"]["kind"] == "Service"
    assert obj["spec"]["endpointPickerRef"]["failureMode"] == "FailClose"
    out = ok(await kubectl("get", "inferencepools"))
    assert out.splitlines()[0].split() == ["NAME", "AGE"]
    assert out.splitlines()[1].split()[0] == "llama"
    # The CRD's descriptions, from /openapi/v3.
    out = ok(await kubectl("explain", "inferencepool.spec.targetPorts"))
    assert "FIELD: targetPorts <[]Object>" in out
    assert "Number defines the port number" in out


async def test_unknown_field_is_400_and_invalid_values_are_422(kubectl: Kubectl) -> None:
    unknown = POOL.replace("PORT", "8000")
    unknown = unknown.replace("  targetPorts:", "  replicas: 2\n  targetPorts:")
    result = await kubectl("apply", "-f", "-", stdin=unknown)
    assert result.code == 1
    assert (
        'InferencePool in version "v1" cannot be handled as a InferencePool: strict decoding '
        'error: unknown field "spec.replicas"'
    ) in result.err
    result = await kubectl("apply", "-f", "-", stdin=POOL.replace("PORT", "0"))
    assert result.code == 1
    assert 'The InferencePool "llama" is invalid' in result.err
    assert (
        "spec.targetPorts[0].number: Invalid value: 0: spec.targetPorts[0].number in body "
        "should be greater than or equal to 1"
    ) in result.err


async def test_crd_rules_and_enums(api: Api) -> None:
    twice = pool(targetPorts=[{"number": 8000}, {"number": 8000}])
    no_port = pool(endpointPickerRef={"name": "epp"})
    bad_protocol = pool(appProtocol="grpc")
    cases = [
        (twice, "spec.targetPorts", 'Invalid value: "array": port number must be unique'),
        (
            no_port,
            "spec.endpointPickerRef",
            "Invalid value: \"object\": port is required when kind is 'Service' or unspecified "
            "(defaults to 'Service')",
        ),
        (
            bad_protocol,
            "spec.appProtocol",
            'Unsupported value: "grpc": supported values: "http", "kubernetes.io/h2c"',
        ),
    ]
    for body, field, message in cases:
        status, answer, _ = await api.call("POST", POOLS, body=body)
        assert status == 422, answer
        assert {"field": field, "message": message} in [
            {"field": c["field"], "message": c["message"]} for c in answer["details"]["causes"]
        ]
    # An enum violation blocks the rules, and one fieldless cause says so.
    status, answer, _ = await api.call("POST", POOLS, body=bad_protocol)
    assert answer["details"]["causes"][-1]["field"] == "<nil>"


async def test_strategic_merge_patch_is_415(api: Api) -> None:
    assert (await api.call("POST", POOLS, body=pool()))[0] == 201
    status, answer, _ = await api.call(
        "PATCH",
        f"{POOLS}/llama",
        body={"spec": {"targetPorts": [{"number": 9000}]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 415, answer
    status, answer, _ = await api.call(
        "PATCH",
        f"{POOLS}/llama",
        body={"spec": {"targetPorts": [{"number": 9000}]}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, answer
    assert answer["spec"]["targetPorts"] == [{"number": 9000}]


async def test_status_subresource_and_watch(api: Api) -> None:
    status, created, _ = await api.call("POST", POOLS, body=pool())
    assert status == 201
    rv = created["metadata"]["resourceVersion"]
    parents = [
        {
            "parentRef": {"name": "gateway"},
            "conditions": [
                {
                    "type": "Accepted",
                    "status": "True",
                    "reason": "Accepted",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    ]
    status, answer, _ = await api.call(
        "PATCH",
        f"{POOLS}/llama/status",
        body={"status": {"parents": parents}, "spec": {"targetPorts": [{"number": 1}]}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, answer
    assert answer["spec"]["targetPorts"] == [{"number": 8000}]  # status writes keep spec
    assert answer["metadata"]["generation"] == 1
    # The parentRef's schema defaults, filled in the status too.
    assert answer["status"]["parents"][0]["parentRef"]["kind"] == "Gateway"
    # A watch from the version the pool was created at replays the change.
    params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "5"}
    headers = {"Authorization": f"Bearer {api.server.admin_token}"}
    async with api.session.get(
        api.server.url + POOLS, params=params, headers=headers, ssl=api.ssl_context
    ) as resp:
        assert resp.status == 200
        event = json.loads(await asyncio.wait_for(resp.content.readline(), 10))
    assert event["type"] == "MODIFIED"
    assert event["object"]["status"]["parents"][0]["parentRef"]["name"] == "gateway"
