"""The little Kubernetes protobuf the API server must read: what kubectl sends.

Clients that prefer protobuf still take JSON answers, so the server answers
JSON everywhere. But kubectl's typed commands also *send* protobuf bodies
(``Content-Type: application/vnd.kubernetes.protobuf``), and a 415 does not
make kubectl 1.32 fall back to JSON (client-go falls back only from CBOR).
Seen from kubectl 1.32 against this server:

==================================  ==========================
command                             body kind
==================================  ==========================
``kubectl auth can-i``              ``SelfSubjectAccessReview``
``kubectl create namespace``        ``Namespace``
``kubectl create secret ...``       ``Secret``
``kubectl create configmap``        ``ConfigMap``
``kubectl create serviceaccount``   ``ServiceAccount``
==================================  ==========================

A body is the ``k8s\\x00`` magic and a ``runtime.Unknown``: field 1 the
TypeMeta (apiVersion 1, kind 2), field 2 the raw message. This module
decodes the messages above by the field numbers of Kubernetes'
``generated.proto`` into the JSON shape; any other kind raises
:class:`UnsupportedKind` and the caller answers 415. Protobuf writes every
non-optional scalar, so empty strings and zeros are dropped, as JSON's
``omitempty`` would never have sent them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

__all__ = ["ProtobufError", "UnsupportedKind", "decode_object"]

_MAGIC = b"k8s\x00"

Fields = dict[int, list[bytes | int]]


class ProtobufError(ValueError):
    """The body is not well-formed Kubernetes protobuf (a 400)."""


class UnsupportedKind(ProtobufError):
    """Well-formed, but of a kind this module does not decode (a 415)."""


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


def _fields(data: bytes) -> Fields:
    """Field number -> values (bytes for length-delimited, int for varints)."""
    out: Fields = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: bytes | int
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated length-delimited field")
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _message(fields: Fields, number: int) -> Fields:
    values = fields.get(number) or [b""]
    value = values[-1]
    return _fields(value) if isinstance(value, bytes) else {}


def _strings(fields: Fields, names: dict[int, str]) -> dict[str, str]:
    """The non-empty string fields among ``names``."""
    out = {}
    for number, name in names.items():
        values = fields.get(number)
        if values and isinstance(values[-1], bytes) and values[-1]:
            out[name] = values[-1].decode()
    return out


def _string_list(fields: Fields, number: int) -> list[str]:
    return [v.decode() for v in fields.get(number, []) if isinstance(v, bytes)]


def _map(fields: Fields, number: int, *, binary: bool = False) -> dict[str, str]:
    """A ``map<string, string|bytes>``: repeated entries of key 1, value 2 (bytes as base64)."""
    out = {}
    for entry in fields.get(number, []):
        if not isinstance(entry, bytes):
            raise ProtobufError(f"field {number} is not a map entry")
        pair = _fields(entry)
        key = pair.get(1, [b""])[-1]
        value = pair.get(2, [b""])[-1]
        if not isinstance(key, bytes) or not isinstance(value, bytes):
            raise ProtobufError(f"field {number} has a map entry that is not bytes")
        out[key.decode()] = base64.b64encode(value).decode() if binary else value.decode()
    return out


def _bool(fields: Fields, number: int) -> bool | None:
    values = fields.get(number)
    return bool(values[-1]) if values else None


def _object_meta(fields: Fields) -> dict[str, Any]:
    """``ObjectMeta`` as a client sends it on create (server-set fields ignored)."""
    meta: dict[str, Any] = _strings(fields, {1: "name", 2: "generateName", 3: "namespace"})
    for number, name in ((11, "labels"), (12, "annotations")):
        if value := _map(fields, number):
            meta[name] = value
    if finalizers := _string_list(fields, 14):
        meta["finalizers"] = finalizers
    return meta


def _set(obj: dict[str, Any], name: str, value: Any) -> None:
    if value not in (None, {}, []):
        obj[name] = value


def _namespace(raw: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    _set(obj, "spec", {"finalizers": f} if (f := _string_list(_message(raw, 2), 1)) else {})
    return obj


def _secret(raw: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    _set(obj, "data", _map(raw, 2, binary=True))
    _set(obj, "type", _strings(raw, {3: "type"}).get("type"))
    _set(obj, "stringData", _map(raw, 4))
    _set(obj, "immutable", _bool(raw, 5))
    return obj


def _config_map(raw: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    _set(obj, "data", _map(raw, 2))
    _set(obj, "binaryData", _map(raw, 3, binary=True))
    _set(obj, "immutable", _bool(raw, 4))
    return obj


def _service_account(raw: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    _set(obj, "automountServiceAccountToken", _bool(raw, 4))
    return obj


def _access_review(raw: Fields) -> dict[str, Any]:
    spec_fields = _message(raw, 2)
    spec: dict[str, Any] = {}
    if 1 in spec_fields:
        spec["resourceAttributes"] = _strings(
            _message(spec_fields, 1),
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
    if 2 in spec_fields:
        spec["nonResourceAttributes"] = _strings(_message(spec_fields, 2), {1: "path", 2: "verb"})
    return {"spec": spec}


# (apiVersion, kind) -> the fields after metadata (field 1 in every one of them).
_DECODERS: dict[tuple[str, str], Callable[[Fields], dict[str, Any]]] = {
    ("v1", "Namespace"): _namespace,
    ("v1", "Secret"): _secret,
    ("v1", "ConfigMap"): _config_map,
    ("v1", "ServiceAccount"): _service_account,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): _access_review,
}


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf body of one of the kinds above as JSON-shaped data."""
    if not body.startswith(_MAGIC):
        raise ProtobufError("not a Kubernetes protobuf envelope (no k8s\\x00 prefix)")
    unknown = _fields(body[len(_MAGIC) :])
    type_meta = _strings(_message(unknown, 1), {1: "apiVersion", 2: "kind"})
    decoder = _DECODERS.get((type_meta.get("apiVersion", ""), type_meta.get("kind", "")))
    if decoder is None:
        known = ", ".join(kind for _, kind in _DECODERS)
        raise UnsupportedKind(
            f"cannot decode protobuf {type_meta.get('apiVersion')}/{type_meta.get('kind')} "
            f"(this server reads protobuf only for {known}; send JSON)"
        )
    raw_value = unknown.get(2, [b""])[-1]
    raw = _fields(raw_value if isinstance(raw_value, bytes) else b"")
    return {**type_meta, "metadata": _object_meta(_message(raw, 1)), **decoder(raw)}
