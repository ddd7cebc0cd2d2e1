"""Protobuf bodies as kubectl 1.32 sends them, decoded to the JSON shape.

Covers: ``kubectl create namespace x`` and ``kubectl create secret generic
s1 --from-literal=a=b --from-literal=token=xyz --type=Opaque``, byte for
byte as captured from kubectl against the sandbox (empty strings and zeros
that protobuf writes are dropped; Secret data is base64 as in JSON); a kind
not decoded is UnsupportedKind (a 415), a body without the envelope a
ProtobufError (a 400).
"""

from __future__ import annotations

import pytest

from loadtests.sandbox.cluster import protobuf

NAMESPACE = bytes.fromhex(
    "6b387300 0a0f0a02 76311209 4e616d65 73706163 6512190a 110a0178 12001a00"
    "22002a00 32003800 42001200 1a020a00 1a002200"
)
SECRET = bytes.fromhex(
    "6b387300 0a0c0a02 76311206 53656372 65741232 0a120a02 73311200 1a002200"
    "2a003200 38004200 12060a01 61120162 120c0a05 746f6b65 6e120378 797a1a06"
    "4f706171 75651a00 2200"
)


def test_namespace_and_secret_as_kubectl_sends_them() -> None:
    assert protobuf.decode_object(NAMESPACE) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "x"},
    }
    assert protobuf.decode_object(SECRET) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s1"},
        "data": {"a": "Yg==", "token": "eHl6"},
        "type": "Opaque",
    }


def test_what_is_not_read() -> None:
    pod = bytes.fromhex("6b387300 0a090a02 76311203 506f64")  # TypeMeta v1/Pod only
    with pytest.raises(protobuf.UnsupportedKind, match="v1/Pod"):
        protobuf.decode_object(pod)
    with pytest.raises(protobuf.ProtobufError, match="no k8s"):
        protobuf.decode_object(b'{"kind": "Namespace"}')
