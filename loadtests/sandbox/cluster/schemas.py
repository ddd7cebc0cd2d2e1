"""The official Kubernetes object schemas, as kubernetes-validate bundles them.

kubernetes-validate ships each release's OpenAPI definitions converted to
JSON Schema (``_definitions.json``, with a ``-strict`` variant that sets
``additionalProperties: false`` everywhere). The API server reads them for
three jobs: validating objects (``validation``), publishing ``/openapi/v3``
(``openapi``) and finding strategic-merge keys (``patching``). This module
loads the definitions once and answers "which definition is this kind" and
"what schema sits under this field".

The version served is the newest bundled one not newer than the API server's
own (v1.32), so the schemas match what kubectl 1.32 expects. The kinds of
the bundled CRDs (``custom_resources``) are added to the same definitions.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from loadtests.sandbox.cluster import custom_resources

__all__ = ["SCHEMA_VERSION", "Definitions", "definitions"]

Schema = dict[str, Any]

SCHEMA_VERSION = "1.32"
_REF_PREFIX = "#/$defs/"


def _schema_dir(strict: bool) -> str:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    wanted = tuple(int(p) for p in SCHEMA_VERSION.split("."))
    best: tuple[tuple[int, ...], str] | None = None
    for entry in root.iterdir():
        m = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local" + ("-strict" if strict else ""), entry.name)
        if m is None:
            continue
        version = (int(m.group(1)), int(m.group(2)))
        if version <= wanted and (best is None or version > best[0]):
            best = (version, entry.name)
    if best is None:
        raise RuntimeError(
            f"kubernetes-validate bundles no schemas for Kubernetes {SCHEMA_VERSION} or older; "
            "install kubernetes-validate>=1.31 (the 'sandbox' extra)"
        )
    return best[1]


class Definitions:
    """One ``_definitions.json``: lookups by name, by kind, and along field paths."""

    def __init__(self, document: Schema, *, directory: str) -> None:
        self.document = document
        self.directory = directory
        self.defs: dict[str, Schema] = document["$defs"]
        self._by_gvk: dict[tuple[str, str, str], str] = {}
        for name, schema in self.defs.items():
            for gvk in schema.get("x-kubernetes-group-version-kind") or ():
                key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
                # Several definitions claim meta types (DeleteOptions, WatchEvent);
                # the first, canonical one wins.
                self._by_gvk.setdefault(key, name)

    def name_for(self, group: str, version: str, kind: str) -> str | None:
        return self._by_gvk.get((group, version, kind))

    def resolve(self, schema: Schema | None) -> Schema | None:
        """Follow ``$ref`` (also through a one-element ``allOf``) to the schema it names."""
        seen = 0
        while schema is not None and seen < 16:
            seen += 1
            ref = schema.get("$ref")
            if isinstance(ref, str):
                schema = self.defs.get(ref.rsplit("/", 1)[-1])
                continue
            all_of = schema.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1:
                schema = all_of[0]
                continue
            return schema
        return schema

    def field(self, schema: Schema | None, key: str) -> Schema | None:
        """The (unresolved) schema of property ``key`` of an object schema."""
        schema = self.resolve(schema)
        if schema is None:
            return None
        props = schema.get("properties")
        if isinstance(props, dict) and key in props:
            found: Schema = props[key]
            return found
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return extra
        return None

    def items(self, schema: Schema | None) -> Schema | None:
        schema = self.resolve(schema)
        if schema is None:
            return None
        items = schema.get("items")
        return items if isinstance(items, dict) else None

    def kind_schema(self, group: str, version: str, kind: str) -> Schema | None:
        name = self.name_for(group, version, kind)
        return self.defs.get(name) if name else None


@cache
def definitions(strict: bool = True) -> Definitions:
    directory = _schema_dir(strict)
    path = resources.files("kubernetes_validate") / "kubernetes-json-schema" / directory
    document = json.loads((path / "_definitions.json").read_text())
    # The bundled CRDs' kinds join the official ones: one set of definitions
    # serves validation, /openapi/v3 and patching for every kind.
    document["$defs"].update(custom_resources.definitions(strict=strict))
    return Definitions(document, directory=directory)


def ref_name(ref: str) -> str:
    return ref[len(_REF_PREFIX) :] if ref.startswith(_REF_PREFIX) else ref.rsplit("/", 1)[-1]
