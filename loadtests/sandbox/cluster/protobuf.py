"""The little Kubernetes protobuf the API server must read: access reviews.

Clients that prefer protobuf still take JSON answers, so the server answers
JSON everywhere. A few typed clients also *send* protobuf bodies, and the one
that matters here is ``kubectl auth can-i``: its ``SelfSubjectAccessReview``
arrives as ``application/vnd.kubernetes.protobuf``. This module decodes that
envelope (the ``k8s\\x00`` magic and a ``runtime.Unknown`` wrapping the raw
message) and that one message type into the JSON shape; anything else sent as
protobuf is refused with 415 by the caller.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ProtobufError", "decode_self_subject_access_review"]

_MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> dict[int, list[bytes | int]]:
    """Field number -> values (bytes for length-delimited, int for varints)."""
    out: dict[int, list[bytes | int]] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: bytes | int
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _message(fields: dict[int, list[bytes | int]], number: int) -> dict[int, list[bytes | int]]:
    values = fields.get(number) or [b""]
    value = values[-1]
    return _fields(value) if isinstance(value, bytes) else {}


def _strings(fields: dict[int, list[bytes | int]], names: dict[int, str]) -> dict[str, str]:
    out = {}
    for number, name in names.items():
        values = fields.get(number)
        if values and isinstance(values[-1], bytes):
            out[name] = values[-1].decode()
    return out


def decode_self_subject_access_review(body: bytes) -> dict[str, Any]:
    """A protobuf ``authorization.k8s.io/v1 SelfSubjectAccessReview`` as JSON-shaped data."""
    if not body.startswith(_MAGIC):
        raise ProtobufError("not a Kubernetes protobuf envelope (no k8s\\x00 prefix)")
    unknown = _fields(body[len(_MAGIC) :])
    type_meta = _strings(_message(unknown, 1), {1: "apiVersion", 2: "kind"})
    if type_meta.get("kind") != "SelfSubjectAccessReview":
        raise ProtobufError(f"cannot decode protobuf kind {type_meta.get('kind')!r}")
    raw = unknown.get(2, [b""])[-1]
    review = _fields(raw if isinstance(raw, bytes) else b"")
    spec = _message(review, 2)
    result: dict[str, Any] = {**type_meta, "metadata": {}, "spec": {}}
    if 1 in spec:
        result["spec"]["resourceAttributes"] = _strings(
            _message(spec, 1),
            {
                1: "namespace",
                2: "verb",
                3: "group",
                4: "version",
                5: "resource",
                6: "subresource",
                7: "name",
            },
        )
    if 2 in spec:
        result["spec"]["nonResourceAttributes"] = _strings(
            _message(spec, 2), {1: "path", 2: "verb"}
        )
    return result
