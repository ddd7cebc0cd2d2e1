"""A held request's place in the hold order: its class, its tenant and its cost.

The Gate releases held requests by class, then in turns across tenants
weighted by cost (:mod:`groundwork.fair_hold_queue`). This module reads the
three from a request that must be held:

- **class** from ``x-tidal-priority`` (``critical``, ``standard``,
  ``sheddable`` or a whole number, higher first:
  :func:`groundwork.rules.priority.parse_priority`), else the target's
  ``routing.tidal.dev/default-priority``. A value that does not parse is
  the default too, and is counted (``bad_priority``): a class only matters
  while a request waits, so a typo must not cost an answer that a free
  replica could give at once; the metric shows who sends it.
- **tenant** from ``x-tidal-tenant``, else the Gateway API Inference
  Extension's fairness header ``x-gateway-inference-fairness-id`` (which
  its endpoint picker groups flows by), else a keyed hash of the bearer
  credential in ``Authorization``, else none (one anonymous tenant). The
  credential itself is never kept: the hash is BLAKE2b keyed with a secret
  drawn when the process starts, so the value cannot be matched against a
  list of tokens, nor across activators (each orders only what it holds).
  A tenant is never a metric label, so its values need no bound.
- **cost**: the request's estimated prompt tokens plus its ``max_tokens``
  (:func:`~activator.balancing.prefix_key.estimated_tokens`) when the body
  was parsed to route by ``model``; else 1, so a target routed by host or
  path shares by request count.

Main decision: nothing here runs for a request that is not held. The fast
path (a free replica and nobody waiting) reads no header and hashes
nothing, so without these headers a request costs what it did before.
GIE's objective header (``x-gateway-inference-objective``) names an
``InferenceObjective`` resource whose priority lives in the cluster; the
activator does not watch those resources, so it does not read that header:
a gateway that resolves it can set ``x-tidal-priority``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from activator.balancing.prefix_key import estimated_tokens
from groundwork.rules.priority import class_label, parse_priority

__all__ = [
    "ANONYMOUS",
    "FAIRNESS_HEADER",
    "PRIORITY_HEADER",
    "TENANT_HEADER",
    "HoldClass",
    "hold_class",
]

PRIORITY_HEADER = b"x-tidal-priority"
TENANT_HEADER = b"x-tidal-tenant"
FAIRNESS_HEADER = b"x-gateway-inference-fairness-id"
_BEARER = b"bearer "
# Drawn once per process: a tenant hash means nothing outside this activator.
_KEY = os.urandom(32)
# A tenant name is an ordering key, not stored per request beyond its flow: a
# client may not make the activator keep a megabyte string per request.
_MAX_TENANT = 128


@dataclass(frozen=True, slots=True)
class HoldClass:
    """Where a held request goes in the order."""

    priority: int
    tenant: str
    cost: int
    bad_priority: bool = False  # the header was there and did not parse
    # The class's metric label (groundwork.rules.priority.class_label), worked out once.
    label: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", class_label(self.priority))


# A request that names nothing, on a target with the default class: shared, so
# that such a request allocates nothing to be placed.
ANONYMOUS = HoldClass(0, "", 1)


def _credential_tenant(value: bytes) -> str:
    if value[:7].lower() != _BEARER:
        return ""
    token = value[7:].strip()
    if not token:
        return ""
    return "key:" + hashlib.blake2b(token, key=_KEY, digest_size=8).hexdigest()


def hold_class(
    index: Mapping[bytes, bytes], default_priority: int, document: object = None
) -> HoldClass:
    """The class, tenant and cost of a request about to be held (module docstring), from
    its headers by lower-cased name and its parsed body (None: not parsed)."""
    priority, bad = default_priority, False
    raw = index.get(PRIORITY_HEADER)
    if raw is not None:
        parsed = parse_priority(raw.decode("latin-1"))
        if parsed is None:
            bad = True
        else:
            priority = parsed
    named = index.get(TENANT_HEADER) or index.get(FAIRNESS_HEADER)
    if named:
        tenant = named[:_MAX_TENANT].decode("latin-1")
    else:
        auth = index.get(b"authorization")
        tenant = _credential_tenant(auth) if auth else ""
    cost = 1
    if document is not None:
        prompt, output = estimated_tokens(document)
        cost = max(1, prompt + output)
    if cost == 1 and not tenant and not bad and priority == ANONYMOUS.priority:
        return ANONYMOUS
    return HoldClass(priority, tenant, cost, bad)
