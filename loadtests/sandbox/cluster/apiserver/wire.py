"""The wire format: JSON answers, ``Status`` errors, and reading request bodies.

Main decision: every answer is compact JSON (also when protobuf is preferred,
which kubectl accepts); a protobuf body is read for the few kinds kubectl
sends that way (:mod:`protobuf`) and refused with 415 otherwise; validation
warnings travel as ``Warning: 299`` headers; a 503 carries ``Retry-After: 1``
so clients back off briefly. A decoded body has its resource quantities
rewritten canonically (``quantity_fields``), as the real server's decoding
does.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from aiohttp import web

from loadtests.sandbox.cluster import custom_resources, protobuf, validation
from loadtests.sandbox.cluster.errors import (
    ApiError,
    BadRequest,
    ServiceUnavailable,
    UnsupportedMediaType,
)
from loadtests.sandbox.cluster.quantity_fields import canonicalize_quantities
from loadtests.sandbox.cluster.resources import ResourceType

__all__ = [
    "JSON",
    "Obj",
    "check_kind",
    "decode_body",
    "dumps",
    "error_response",
    "is_dry_run",
    "json_response",
    "read_body",
    "truthy",
]

Obj = dict[str, Any]

JSON = "application/json"


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def json_response(
    value: Any, *, status: int = 200, content_type: str = JSON, warnings: list[str] | None = None
) -> web.Response:
    response = web.Response(body=dumps(value), status=status, content_type="application/json")
    if content_type != JSON:
        response.headers["Content-Type"] = content_type
    for warning in warnings or ():
        escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{escaped}"')
    return response


def error_response(error: ApiError) -> web.Response:
    response = json_response(error.status(), status=error.code)
    if isinstance(error, ServiceUnavailable):
        response.headers["Retry-After"] = "1"
    return response


def truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


async def read_body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        raise BadRequest("the request body is empty")
    content_type = request.headers.get("Content-Type", JSON).split(";")[0].strip()
    if "protobuf" in content_type:
        try:
            return protobuf.decode_object(raw)
        except protobuf.UnsupportedKind as error:
            raise UnsupportedMediaType(
                f"{error} - accepted media types include: application/json, "
                "application/yaml, and application/vnd.kubernetes.protobuf for those kinds"
            ) from None
        except protobuf.ProtobufError as error:
            raise BadRequest(f"cannot decode the protobuf body: {error}") from None
    try:
        if content_type.endswith("yaml"):
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as error:
        raise BadRequest(f"the request body is not valid JSON or YAML: {error}") from None


def check_kind(
    rtype: ResourceType,
    body: Any,
    *,
    expected_kind: str | None = None,
    expected_api_version: str | None = None,
) -> Obj:
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object describing a {rtype.kind}")
    kind = expected_kind or rtype.kind
    api_version = expected_api_version or rtype.api_version
    got_version = body.get("apiVersion")
    got_kind = body.get("kind")
    if got_version and got_version != api_version:
        raise BadRequest(
            f"the API version in the data ({got_version}) does not match the expected API "
            f"version ({api_version})"
        )
    if got_kind and got_kind != kind:
        raise BadRequest(
            f'{got_kind} in version "{got_version or api_version.split("/")[-1]}" cannot be '
            f'handled as a {kind}: no kind "{got_kind}" is registered for version '
            f'"{api_version}"'
        )
    body["apiVersion"] = api_version
    body["kind"] = kind
    return body


def decode_body(rtype: ResourceType, obj: Obj, request: web.Request) -> list[str]:
    """Validate ``obj`` as its kind and write its quantities canonically; the warnings.

    What the real server's decoding does to a typed object: afterwards the
    object reads back as it would from a real cluster (``nvidia.com/gpu: 1``
    as ``"1"``). A custom resource gets its schema's defaults first: its
    CRD's rules read defaulted fields, as the real server's do.
    """
    custom_resources.apply_defaults(obj, group=rtype.group, version=rtype.version, kind=rtype.kind)
    warnings = validation.validate_object(
        obj,
        group=rtype.group,
        version=rtype.version,
        kind=rtype.kind,
        namespaced=rtype.namespaced,
        field_validation=request.query.get("fieldValidation", "Warn"),
    )
    canonicalize_quantities(obj, group=rtype.group, version=rtype.version, kind=rtype.kind)
    return warnings


def is_dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for value in values:
        if value != "All":
            raise BadRequest(f"Invalid dry run value {value!r}: only 'All' is supported")
    return bool(values)
