"""The ``routing.tidal.dev/*`` annotations: every key, its grammar, and the one reading of them.

The activator routes by these keys (:mod:`activator.kube.translate` builds a
target from :func:`read_routing`'s values) and the scaler checks them
(:mod:`scaler.policy.routing_check` raises an ``InvalidRouting`` Warning
Event from :func:`read_routing`'s problems), so a value is bad for both or
for neither; a unit test feeds every key's good and bad values to both
services' readers and compares the verdicts.

Main decisions:

- **A bad value keeps the key's default** (one typo must not take a model
  off the data path): the activator routes with it while the scaler's
  Warning says what to fix.
- **An unknown key is a typo**, named with the closest known one
  (``routing.tidal.dev/model`` for ``models``) and ignored.
- **Adapters must not shadow the model**: a declared adapter named like one
  of ``routing.tidal.dev/models`` could never be asked for (``model`` names
  the base model first), so it is a problem of ``adapters``. A ConfigMap's
  adapters (``adapters-configmap``) follow the same rules
  (:func:`adapter_pairs`), checked by the activator, which reads the
  ConfigMap; the scaler checks the ConfigMap's name only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groundwork.rules.annotation_keys import Key, KeyReader, Problem, unknown_key_problems
from groundwork.rules.durations import format_duration
from groundwork.rules.priority import PRIORITY_ALLOWED, STANDARD, parse_priority
from groundwork.rules.values import (
    ANYTHING,
    COMMA_LIST,
    DNS_NAME,
    FLAG,
    PATH_PREFIX,
    SERVICE_PORT,
    Grammar,
    duration_in,
    one_of,
    whole_in,
)

__all__ = [
    "ADAPTERS",
    "ADAPTERS_CONFIGMAP",
    "ADAPTER_NAME",
    "BALANCING",
    "BALANCING_MODES",
    "COLD_START_TIMEOUT",
    "COLD_START_TIMEOUT_RANGE_S",
    "CONTAINER_CONCURRENCY",
    "CONTAINER_CONCURRENCY_RANGE",
    "DEFAULT_BALANCING",
    "DEFAULT_COLD_START_TIMEOUT_S",
    "DEFAULT_CONTAINER_CONCURRENCY",
    "DEFAULT_MAX_BUFFERED",
    "DEFAULT_PRIORITY",
    "DEFAULT_PRIORITY_KEY",
    "DEFAULT_RESEND_UNANSWERED",
    "HOSTS",
    "MAX_BUFFERED",
    "MAX_BUFFERED_RANGE",
    "MODELS",
    "PATH_PREFIX_KEY",
    "PORT",
    "RESEND_UNANSWERED",
    "ROUTING_KEYS",
    "ROUTING_PREFIX",
    "SERVICE",
    "SHED_AT_ZERO",
    "Adapter",
    "RoutingValues",
    "adapter_pairs",
    "read_routing",
]

ROUTING_PREFIX = "routing.tidal.dev/"
_R = ROUTING_PREFIX

# The limits (docs/annotations.md); a routes file's targets share them.
DEFAULT_COLD_START_TIMEOUT_S = 600.0
COLD_START_TIMEOUT_RANGE_S = (1.0, 3600.0)
DEFAULT_MAX_BUFFERED = 1000
MAX_BUFFERED_RANGE = (0, 100_000)
DEFAULT_CONTAINER_CONCURRENCY = 0
CONTAINER_CONCURRENCY_RANGE = (0, 10_000)
# How a request picks among ready replicas: least in flight, or where its
# prompt's prefix is most likely cached (activator.balancing.prefix_affinity).
BALANCING_MODES = ("least-loaded", "prefix")
DEFAULT_BALANCING = "least-loaded"
# A request whose replica closed the connection before a byte of answer is
# sent once more (activator.statuses says why that suits inference).
DEFAULT_RESEND_UNANSWERED = True
# The class of a held request that names none.
DEFAULT_PRIORITY = STANDARD

# An adapter name as vLLM takes it in ``model`` and a ConfigMap takes it as a key,
# and where vLLM loads it from (a path or a Hugging Face id).
ADAPTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_ADAPTER_SOURCE = re.compile(r"[^\s,=]+")
_ADAPTERS_SAY = (
    "comma-separated name=source, each name once (letters, digits, '.', '_', '-') and "
    "each source a path or Hugging Face id without spaces"
)


@dataclass(frozen=True, slots=True)
class Adapter:
    """One declared LoRA adapter: the ``model`` name and where vLLM loads it from."""

    name: str
    source: str


def adapter_pairs(
    pairs: Mapping[str, str], *, base_models: tuple[str, ...] = (), where: str = "adapters"
) -> tuple[Adapter, ...]:
    """Name -> source pairs as adapters, in name order; ValueError naming the first bad one."""
    adapters = []
    for name, source in sorted(pairs.items()):
        name, source = name.strip(), source.strip()
        if not ADAPTER_NAME.fullmatch(name):
            raise ValueError(
                f"{where}: adapter name {name!r} is not allowed; use letters, digits, "
                "'.', '_' and '-', starting with a letter or digit"
            )
        if not _ADAPTER_SOURCE.fullmatch(source):
            raise ValueError(
                f"{where}: adapter {name!r} needs a source (a path or a Hugging Face id, "
                f"without spaces, ',' or '='); got {source!r}"
            )
        if name in base_models:
            raise ValueError(f"{where}: adapter {name!r} has the name of the base model")
        adapters.append(Adapter(name, source))
    return tuple(adapters)


def _adapters(text: str) -> tuple[Adapter, ...]:
    """``"sql=/models/sql-lora, chat=org/chat-lora"`` -> adapters; ValueError when bad."""
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, source = item.partition("=")
        if not sep:
            raise ValueError(
                f"adapters: {item!r} is not name=source, such as sql-lora=/models/sql-lora"
            )
        if name.strip() in pairs:
            raise ValueError(f"adapters: {name.strip()!r} is declared twice")
        pairs[name.strip()] = source
    if not pairs:
        raise ValueError("adapters: the list is empty; expected name=source, ...")
    return adapter_pairs(pairs)


def _priority(text: str) -> int:
    value = parse_priority(text)
    if value is None:
        raise ValueError(f"{text!r} is not a priority")
    return value


def _range_says(low: float, high: float) -> str:
    return f"{format_duration(low)} to {format_duration(high)}"


SERVICE = Key(
    _R + "service",
    ANYTHING,
    "",
    "a Service name",
    "the Service whose EndpointSlices list the replicas",
    default_note="the Deployment's name",
)
PORT = Key(
    _R + "port",
    SERVICE_PORT,
    "",
    "a port number 1 to 65535 or a port name",
    "Service port to send traffic to",
    default_note="the Service's first port",
)
HOSTS = Key(
    _R + "hosts",
    COMMA_LIST,
    "",
    "comma-separated host names; `*.example.com` allowed",
    "Host header values routed to this model",
    default_note="none",
)
PATH_PREFIX_KEY = Key(
    _R + "path-prefix",
    PATH_PREFIX,
    "",
    "a path starting with `/`",
    "path prefix routed to this model (the longest match wins)",
    default_note="none",
)
MODELS = Key(
    _R + "models",
    COMMA_LIST,
    "",
    "comma-separated names",
    "OpenAI `model` names served (listed by `GET /v1/models`)",
    default_note="none",
)
ADAPTERS = Key(
    _R + "adapters",
    Grammar(_adapters, _ADAPTERS_SAY, detail=True),
    "",
    "comma-separated `name=source` (source: a path or Hugging Face id vLLM loads from)",
    "LoRA adapters the replicas may load on demand; a request names one in `model` "
    "([adapters](adapters.md))",
    default_note="none",
)
ADAPTERS_CONFIGMAP = Key(
    _R + "adapters-configmap",
    DNS_NAME,
    "",
    "a ConfigMap name in the Deployment's namespace",
    "more adapters: each key of the ConfigMap's `data` an adapter name, its value the "
    "source (for hundreds)",
    default_note="none",
)
COLD_START_TIMEOUT = Key(
    _R + "cold-start-timeout",
    duration_in(*COLD_START_TIMEOUT_RANGE_S),
    format_duration(DEFAULT_COLD_START_TIMEOUT_S),
    _range_says(*COLD_START_TIMEOUT_RANGE_S),
    "how long a request may wait for a ready replica before a 504",
)
MAX_BUFFERED = Key(
    _R + "max-buffered",
    whole_in(*MAX_BUFFERED_RANGE),
    str(DEFAULT_MAX_BUFFERED),
    f"{MAX_BUFFERED_RANGE[0]} to {MAX_BUFFERED_RANGE[1]}",
    "requests one activator holds for this model; more get a 503",
)
CONTAINER_CONCURRENCY = Key(
    _R + "container-concurrency",
    whole_in(
        *CONTAINER_CONCURRENCY_RANGE,
        says=f"an integer from {CONTAINER_CONCURRENCY_RANGE[0]} to "
        f"{CONTAINER_CONCURRENCY_RANGE[1]} (0: no limit)",
    ),
    str(DEFAULT_CONTAINER_CONCURRENCY),
    f"{CONTAINER_CONCURRENCY_RANGE[0]} to {CONTAINER_CONCURRENCY_RANGE[1]} (0: no limit)",
    "most requests in flight per replica",
)
BALANCING = Key(
    _R + "balancing",
    one_of(*BALANCING_MODES),
    DEFAULT_BALANCING,
    " or ".join(f"`{m}`" for m in BALANCING_MODES),
    "how a request picks a ready replica: the fewest in flight, or where its prompt's "
    "prefix is most likely cached, within 1.25x the mean load "
    "([prefix-aware routing](prefix-routing.md))",
)
RESEND_UNANSWERED = Key(
    _R + "resend-unanswered",
    FLAG,
    "true",
    "`true` or `false`",
    "send a request once more when its replica closed the connection before any byte of "
    "answer (RFC 9110 §9.2.2 lets a proxy resend only what it is configured to treat as "
    "idempotent; inference is, so the default is `true`)",
)
DEFAULT_PRIORITY_KEY = Key(
    _R + "default-priority",
    Grammar(_priority, PRIORITY_ALLOWED),
    "standard",
    "`critical`, `standard`, `sheddable` or a whole number -1000000 to 1000000",
    "class of a held request without an `x-tidal-priority` header; higher classes are "
    "released first and shed last ([priority and fairness](priority.md))",
)
SHED_AT_ZERO = Key(
    _R + "shed-at-zero",
    FLAG,
    "false",
    "`true` or `false`",
    "refuse a sheddable request (class below 0) at once with `503 shed` when no replica "
    "is ready, rather than hold it through a cold start",
)

#: Every routing key, in the order docs/annotations.md lists them.
ROUTING_KEYS: tuple[Key[Any], ...] = (
    SERVICE,
    PORT,
    HOSTS,
    PATH_PREFIX_KEY,
    MODELS,
    ADAPTERS,
    ADAPTERS_CONFIGMAP,
    COLD_START_TIMEOUT,
    MAX_BUFFERED,
    CONTAINER_CONCURRENCY,
    BALANCING,
    RESEND_UNANSWERED,
    DEFAULT_PRIORITY_KEY,
    SHED_AT_ZERO,
)


@dataclass(frozen=True, slots=True)
class RoutingValues:
    """What a Deployment's routing annotations say, each bad or unset one at its default."""

    service: str  # "" when unset: the Deployment's name
    port: int | str | None  # None: the Service's first port
    hosts: tuple[str, ...]
    path_prefix: str | None
    models: tuple[str, ...]
    adapters: tuple[Adapter, ...]
    adapters_configmap: str | None
    cold_start_timeout_s: float
    max_buffered: int
    container_concurrency: int
    balancing: str
    resend_unanswered: bool
    default_priority: int
    shed_at_zero: bool
    problems: tuple[Problem, ...]  # unknown keys first, then bad values


def read_routing(annotations: Mapping[str, str]) -> RoutingValues:
    """Every ``routing.tidal.dev/*`` key of ``annotations``, read by its grammar."""
    r = KeyReader(annotations)
    models = r.get(MODELS) or ()
    adapters = r.get(ADAPTERS) or ()
    shadowed = [a.name for a in adapters if a.name in models]
    if shadowed:
        r.bad(ADAPTERS, f"{_ADAPTERS_SAY}; no adapter named as a model ({', '.join(shadowed)})")
        adapters = ()
    unknown = unknown_key_problems(
        annotations, prefixes=(ROUTING_PREFIX,), known=[k.name for k in ROUTING_KEYS]
    )
    return RoutingValues(
        service=r.get(SERVICE) or "",
        port=r.get(PORT),
        hosts=r.get(HOSTS) or (),
        path_prefix=r.get(PATH_PREFIX_KEY),
        models=models,
        adapters=adapters,
        adapters_configmap=r.get(ADAPTERS_CONFIGMAP),
        cold_start_timeout_s=r.value(COLD_START_TIMEOUT),
        max_buffered=r.value(MAX_BUFFERED),
        container_concurrency=r.value(CONTAINER_CONCURRENCY),
        balancing=r.value(BALANCING),
        resend_unanswered=r.value(RESEND_UNANSWERED),
        default_priority=r.value(DEFAULT_PRIORITY_KEY),
        shed_at_zero=r.value(SHED_AT_ZERO),
        # Every argument above is read first (left to right), so this is complete.
        problems=(*unknown, *r.problems),
    )
