"""Kubernetes objects -> targets: pure functions over the API's JSON (plain dicts).

Inputs are the objects as the API server sends them (``raw_object`` of watch
events, items of lists), so these functions need no client and are tested
with literal dicts.

- :func:`target_from_deployment` reads an opted-in Deployment's
  ``routing.tidal.dev/*`` annotations (docs/annotations.md). A bad value is reported
  (the returned problems name the key, the value and what is allowed) and
  its default is used, so one typo does not take a model off the data path;
  an unknown key is reported with the closest known one ("did you mean")
  and ignored. The scaler raises the ``InvalidRouting`` event.
  Declared LoRA
  adapters come from ``routing.tidal.dev/adapters`` and the ConfigMap named
  by ``routing.tidal.dev/adapters-configmap`` (the annotation wins a name
  both declare).
- :func:`endpoints_from_slices` turns the EndpointSlices of the target's
  Service into endpoints: every address of every endpoint, with ``ready``
  as the slice says (an absent condition means ready, as the API
  documents). A ``terminating`` endpoint, or one still ``serving`` but not
  ``ready`` (how a terminating pod looks when the API server does not say
  ``terminating``), is *draining*: kept, so its in-flight requests stay
  counted, but never ready. The port is the Service port named by
  ``routing.tidal.dev/port`` (a number or a name; default: the first port),
  looked up by name in the slice, since slices carry the Service's port
  names with the *target* port numbers. An endpoint whose ``nodeName`` is
  under an interruption notice (a spot node the cloud is taking back; see
  :mod:`activator.kube.notice_taints`) is draining too, though still ready in
  the slice: no new request goes there, the ones in flight finish within
  the notice.
- :func:`build_targets` joins Deployments, Services and slices (and the
  names of the nodes under notice).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from activator.targets import (
    ADAPTER_KEEP_ALIVE_RANGE_S,
    BALANCING_MODES,
    COLD_START_TIMEOUT_RANGE_S,
    CONTAINER_CONCURRENCY_RANGE,
    DEFAULT_ADAPTER_KEEP_ALIVE_S,
    DEFAULT_BALANCING,
    DEFAULT_COLD_START_TIMEOUT_S,
    DEFAULT_CONTAINER_CONCURRENCY,
    DEFAULT_MAX_BUFFERED,
    DEFAULT_RESEND_UNANSWERED,
    MAX_BUFFERED_RANGE,
    Adapter,
    Discovered,
    Endpoint,
    TargetSpec,
    adapters_from_mapping,
    parse_adapters,
    parse_duration_s,
)
from groundwork.priority import PRIORITY_ALLOWED, parse_priority

__all__ = [
    "ENABLED_LABEL",
    "ROUTING_ANNOTATIONS",
    "SERVICE_NAME_LABEL",
    "Routing",
    "RoutingAnnotation",
    "build_targets",
    "endpoints_from_slices",
    "target_from_deployment",
]

ENABLED_LABEL = "autoscaling.tidal.dev/enabled"
# A model with a TTFT objective is sized in prompt tokens: its requests' token
# estimates are worth counting (the scaler validates the value; here only its presence).
SLO_TTFT_ANNOTATION = "autoscaling.tidal.dev/slo-ttft"
# How long a LoRA adapter stays loaded idle: the activator unloads it, so it
# reads the key; the scaler validates it with the other autoscaling keys.
ADAPTER_KEEP_ALIVE_ANNOTATION = "autoscaling.tidal.dev/adapter-keep-alive"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
_R = "routing.tidal.dev/"

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RoutingAnnotation:
    """One ``routing.tidal.dev/*`` annotation as a user sees it (a row of docs/annotations.md).

    ``default`` is the annotation text equal to the default (a unit test
    parses it and checks it changes nothing); ``default_note`` describes a
    default that depends on the Deployment instead.
    """

    key: str
    default: str
    default_note: str
    allowed: str
    meaning: str


#: Every routing annotation :func:`target_from_deployment` reads, in the order
#: docs/annotations.md lists them.
ROUTING_ANNOTATIONS: tuple[RoutingAnnotation, ...] = (
    RoutingAnnotation(
        _R + "service",
        "",
        "the Deployment's name",
        "a Service name",
        "the Service whose EndpointSlices list the replicas",
    ),
    RoutingAnnotation(
        _R + "port",
        "",
        "the Service's first port",
        "a port number 1 to 65535 or a port name",
        "Service port to send traffic to",
    ),
    RoutingAnnotation(
        _R + "hosts",
        "",
        "none",
        "comma-separated host names; `*.example.com` allowed",
        "Host header values routed to this model",
    ),
    RoutingAnnotation(
        _R + "path-prefix",
        "",
        "none",
        "a path starting with `/`",
        "path prefix routed to this model (the longest match wins)",
    ),
    RoutingAnnotation(
        _R + "models",
        "",
        "none",
        "comma-separated names",
        "OpenAI `model` names served (listed by `GET /v1/models`)",
    ),
    RoutingAnnotation(
        _R + "adapters",
        "",
        "none",
        "comma-separated `name=source` (source: a path or Hugging Face id vLLM loads from)",
        "LoRA adapters the replicas may load on demand; a request names one in `model` "
        "([adapters](adapters.md))",
    ),
    RoutingAnnotation(
        _R + "adapters-configmap",
        "",
        "none",
        "a ConfigMap name in the Deployment's namespace",
        "more adapters: each key of the ConfigMap's `data` an adapter name, its value the "
        "source (for hundreds)",
    ),
    RoutingAnnotation(
        _R + "cold-start-timeout",
        "10m",
        "",
        "1s to 1h",
        "how long a request may wait for a ready replica before a 504",
    ),
    RoutingAnnotation(
        _R + "max-buffered",
        str(DEFAULT_MAX_BUFFERED),
        "",
        f"{MAX_BUFFERED_RANGE[0]} to {MAX_BUFFERED_RANGE[1]}",
        "requests one activator holds for this model; more get a 503",
    ),
    RoutingAnnotation(
        _R + "container-concurrency",
        str(DEFAULT_CONTAINER_CONCURRENCY),
        "",
        f"{CONTAINER_CONCURRENCY_RANGE[0]} to {CONTAINER_CONCURRENCY_RANGE[1]} (0: no limit)",
        "most requests in flight per replica",
    ),
    RoutingAnnotation(
        _R + "balancing",
        DEFAULT_BALANCING,
        "",
        " or ".join(f"`{m}`" for m in BALANCING_MODES),
        "how a request picks a ready replica: the fewest in flight, or where its prompt's "
        "prefix is most likely cached, within 1.25x the mean load "
        "([prefix-aware routing](prefix-routing.md))",
    ),
    RoutingAnnotation(
        _R + "resend-unanswered",
        "true",
        "",
        "`true` or `false`",
        "send a request once more when its replica closed the connection before any byte of "
        "answer (RFC 9110 §9.2.2 lets a proxy resend only what it is configured to treat as "
        "idempotent; inference is, so the default is `true`)",
    ),
    RoutingAnnotation(
        _R + "default-priority",
        "standard",
        "",
        "`critical`, `standard`, `sheddable` or a whole number -1000000 to 1000000",
        "class of a held request without an `x-tidal-priority` header; higher classes are "
        "released first and shed last ([priority and fairness](priority.md))",
    ),
    RoutingAnnotation(
        _R + "shed-at-zero",
        "false",
        "",
        "`true` or `false`",
        "refuse a sheddable request (class below 0) at once with `503 shed` when no replica "
        "is ready, rather than hold it through a cold start",
    ),
)


@dataclass(frozen=True, slots=True)
class Routing:
    """What one Deployment says about routing, before endpoints are known."""

    spec: TargetSpec
    service: str
    port: str | int | None
    problems: tuple[str, ...] = ()


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata") or {}
    return meta if isinstance(meta, Mapping) else {}


def key_of(obj: Obj) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _list(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _int_in(value: str, lo: int, hi: int) -> int:
    number = int(value.strip())
    if not lo <= number <= hi:
        raise ValueError
    return number


def _adapters(
    notes: Mapping[str, str],
    configmaps: Mapping[str, Obj],
    namespace: str,
    base_models: tuple[str, ...],
    bad: Callable[[str, str], None],
) -> tuple[tuple[Adapter, ...], float]:
    """The declared adapters (annotation, then ConfigMap) and their keep-alive."""
    adapters: dict[str, Adapter] = {}
    if _R + "adapters" in notes:
        try:
            adapters.update(
                (a.name, a) for a in parse_adapters(notes[_R + "adapters"], base_models=base_models)
            )
        except ValueError as exc:
            bad("adapters", f"allowed: comma-separated name=source ({exc})")
    cm_name = (notes.get(_R + "adapters-configmap") or "").strip()
    if cm_name:
        data = (configmaps.get(f"{namespace}/{cm_name}") or {}).get("data")
        try:
            if not isinstance(data, Mapping):
                raise ValueError(f"no ConfigMap {namespace}/{cm_name} with data")
            where = f"ConfigMap {namespace}/{cm_name}"
            found = adapters_from_mapping(data, base_models=base_models, where=where)
            adapters.update((a.name, a) for a in found if a.name not in adapters)
        except ValueError as exc:
            bad("adapters-configmap", f"allowed: a ConfigMap of name: source ({exc})")
    keep_alive = DEFAULT_ADAPTER_KEEP_ALIVE_S
    if ADAPTER_KEEP_ALIVE_ANNOTATION in notes:
        try:
            keep_alive = parse_duration_s(notes[ADAPTER_KEEP_ALIVE_ANNOTATION], key="keep-alive")
            lo, hi = ADAPTER_KEEP_ALIVE_RANGE_S
            if not lo <= keep_alive <= hi:
                raise ValueError
        except ValueError:
            keep_alive = DEFAULT_ADAPTER_KEEP_ALIVE_S  # the scaler raises the Event
    return tuple(sorted(adapters.values(), key=lambda a: a.name)), keep_alive


def _unknown_keys(name: str, notes: Mapping[str, str]) -> list[str]:
    """A problem for each ``routing.tidal.dev/*`` key not read here, with the closest
    known key (difflib's ratio); the reference page lists them all."""
    known = [a.key.removeprefix(_R) for a in ROUTING_ANNOTATIONS]
    problems = []
    for key, value in notes.items():
        if key.startswith(_R) and key.removeprefix(_R) not in known:
            # Names compared without the prefix, which would make every key look close.
            close = difflib.get_close_matches(key.removeprefix(_R), known, n=1, cutoff=0.6)
            hint = f" (did you mean {_R}{close[0]}?)" if close else ""
            problems.append(
                f"{name}: annotation {key}={value!r} is unknown, ignored{hint};"
                " every key: docs/annotations.md"
            )
    return problems


def target_from_deployment(deployment: Obj, configmaps: Mapping[str, Obj] | None = None) -> Routing:
    """``configmaps`` by ``namespace/name``: where ``adapters-configmap`` is looked up."""
    meta = _meta(deployment)
    name = key_of(deployment)
    notes: Mapping[str, str] = meta.get("annotations") or {}
    problems: list[str] = []

    def bad(key: str, allowed: str) -> None:
        problems.append(
            f"{name}: annotation {_R}{key}={notes.get(_R + key)!r} is invalid; {allowed}"
        )

    problems.extend(_unknown_keys(name, notes))
    cold_s = DEFAULT_COLD_START_TIMEOUT_S
    if _R + "cold-start-timeout" in notes:
        try:
            cold_s = parse_duration_s(notes[_R + "cold-start-timeout"], key="cold-start-timeout")
            lo, hi = COLD_START_TIMEOUT_RANGE_S
            if not lo <= cold_s <= hi:
                raise ValueError
        except ValueError:
            bad("cold-start-timeout", "allowed: a duration from 1s to 1h, such as 10m")
            cold_s = DEFAULT_COLD_START_TIMEOUT_S
    max_buffered = DEFAULT_MAX_BUFFERED
    if _R + "max-buffered" in notes:
        try:
            max_buffered = _int_in(notes[_R + "max-buffered"], *MAX_BUFFERED_RANGE)
        except ValueError:
            bad("max-buffered", "allowed: a whole number 0..100000")
    cc = DEFAULT_CONTAINER_CONCURRENCY
    if _R + "container-concurrency" in notes:
        try:
            cc = _int_in(notes[_R + "container-concurrency"], *CONTAINER_CONCURRENCY_RANGE)
        except ValueError:
            bad("container-concurrency", "allowed: a whole number 0..10000 (0: no limit)")
    balancing = notes.get(_R + "balancing", DEFAULT_BALANCING).strip()
    if balancing not in BALANCING_MODES:
        bad("balancing", "allowed: " + " or ".join(BALANCING_MODES))
        balancing = DEFAULT_BALANCING
    resend = DEFAULT_RESEND_UNANSWERED
    if _R + "resend-unanswered" in notes:
        flag = notes[_R + "resend-unanswered"].strip().lower()
        if flag in ("true", "false"):
            resend = flag == "true"
        else:
            bad("resend-unanswered", "allowed: true or false")
    priority = 0
    if _R + "default-priority" in notes:
        parsed = parse_priority(notes[_R + "default-priority"])
        if parsed is None:
            bad("default-priority", "allowed: " + PRIORITY_ALLOWED)
        else:
            priority = parsed
    shed_at_zero = notes.get(_R + "shed-at-zero", "false").strip().lower()
    if shed_at_zero not in ("true", "false"):
        bad("shed-at-zero", "allowed: true or false")
    prefix = notes.get(_R + "path-prefix")
    if prefix is not None and not prefix.startswith("/"):
        bad("path-prefix", "allowed: a path starting with '/'")
        prefix = None
    port: str | int | None = None
    if _R + "port" in notes:
        raw = notes[_R + "port"].strip()
        if raw.isdigit() and 0 < int(raw) < 65536:
            port = int(raw)
        elif raw and not raw.isdigit():
            port = raw
        else:
            bad("port", "allowed: a port number 1..65535 or a port name")
    service = (notes.get(_R + "service") or "").strip() or str(meta.get("name", ""))
    models = _list(notes.get(_R + "models", ""))
    adapters, keep_alive_s = _adapters(
        notes, configmaps or {}, str(meta.get("namespace", "")), models, bad
    )
    spec = TargetSpec(
        name=name,
        hosts=_list(notes.get(_R + "hosts", "")),
        path_prefix=prefix,
        models=models,
        container_concurrency=cc,
        cold_start_timeout_s=cold_s,
        max_buffered=max_buffered,
        balancing=balancing,
        resend_unanswered=resend,
        counts_tokens=SLO_TTFT_ANNOTATION in notes,
        adapters=adapters,
        adapter_keep_alive_s=keep_alive_s,
        default_priority=priority,
        shed_at_zero=shed_at_zero == "true",
    )
    return Routing(spec=spec, service=service, port=port, problems=tuple(problems))


def _slice_port_name(port: str | int | None, service: Obj | None) -> str | int | None:
    """Which slice port to use: a name (matched by name) or a number (matched by number)."""
    if isinstance(port, str):
        return port
    ports = ((service or {}).get("spec") or {}).get("ports") or []
    if port is None:
        return str(ports[0].get("name") or "") if ports else None
    for p in ports:
        if p.get("port") == port:
            return str(p.get("name") or "")
    return port


def endpoints_from_slices(
    slices: Iterable[Obj],
    *,
    port: str | int | None,
    service: Obj | None = None,
    nodes_under_notice: frozenset[str] = frozenset(),
) -> tuple[Endpoint, ...]:
    wanted = _slice_port_name(port, service)
    found: dict[tuple[str, int], Endpoint] = {}
    for sl in slices:
        if sl.get("addressType") not in ("IPv4", "IPv6"):
            continue
        number: int | None = None
        slice_ports = sl.get("ports") or []
        for p in slice_ports:
            if (
                wanted is None
                or (isinstance(wanted, str) and (p.get("name") or "") == wanted)
                or (isinstance(wanted, int) and p.get("port") == wanted)
            ):
                number = p.get("port")
                break
        if number is None:
            continue
        for ep in sl.get("endpoints") or []:
            conditions = ep.get("conditions") or {}
            ready_condition = conditions.get("ready")
            draining = (
                conditions.get("terminating") is True
                or (conditions.get("serving") is True and ready_condition is False)
                or (ep.get("nodeName") in nodes_under_notice)
            )
            ready = not draining and (ready_condition is None or bool(ready_condition))
            ref = ep.get("targetRef") or {}
            pod = str(ref.get("name", "")) if ref.get("kind") == "Pod" else ""
            for address in ep.get("addresses") or []:
                key = (str(address), int(number))
                previous = found.get(key)
                # One address in two slices (a slice being replaced): the
                # livelier view wins, ready over not ready over draining.
                if (
                    previous is None
                    or (ready and not previous.ready)
                    or (previous.draining and not draining)
                ):
                    found[key] = Endpoint(
                        host=str(address),
                        port=int(number),
                        name=pod,
                        ready=ready,
                        draining=draining,
                    )
    return tuple(found[k] for k in sorted(found))


def build_targets(
    deployments: Iterable[Obj],
    services: Mapping[str, Obj],
    slices: Iterable[Obj],
    *,
    nodes_under_notice: frozenset[str] = frozenset(),
    configmaps: Mapping[str, Obj] | None = None,
) -> tuple[dict[str, Discovered], list[str]]:
    """Join the three kinds; ``services`` by ``namespace/name``. Returns (targets, problems).

    Endpoints on a node in ``nodes_under_notice`` are draining; ``configmaps``
    (by ``namespace/name``) hold the adapter lists ``adapters-configmap`` names.
    """
    by_service: dict[str, list[Obj]] = {}
    for sl in slices:
        meta = _meta(sl)
        svc = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if svc:
            by_service.setdefault(f"{meta.get('namespace', '')}/{svc}", []).append(sl)
    targets: dict[str, Discovered] = {}
    problems: list[str] = []
    for dep in deployments:
        labels = _meta(dep).get("labels") or {}
        if labels.get(ENABLED_LABEL) != "true":
            continue
        try:
            routing = target_from_deployment(dep, configmaps)
        except ValueError as exc:  # a name that is not namespace/name: skip it
            problems.append(str(exc))
            continue
        problems.extend(routing.problems)
        namespace = routing.spec.name.split("/")[0]
        svc_key = f"{namespace}/{routing.service}"
        endpoints = endpoints_from_slices(
            by_service.get(svc_key, ()),
            port=routing.port,
            service=services.get(svc_key),
            nodes_under_notice=nodes_under_notice,
        )
        targets[routing.spec.name] = Discovered(routing.spec, endpoints)
    return targets, problems
