"""Kubernetes objects -> targets: pure functions over the API's JSON (plain dicts).

Inputs are the objects as the API server sends them (``raw_object`` of watch
events, items of lists), so these functions need no client and are tested
with literal dicts.

- :func:`target_from_deployment` reads an opted-in Deployment's
  ``routing.tidal.dev/*`` annotations (docs/annotations.md) with the rules
  both services share (:func:`groundwork.rules.routing_keys.read_routing`). A bad value is reported
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from activator.targets import (
    DEFAULT_ADAPTER_KEEP_ALIVE_S,
    Adapter,
    Discovered,
    Endpoint,
    TargetSpec,
)
from groundwork.rules.routing_keys import ROUTING_PREFIX, adapter_pairs, read_routing
from groundwork.rules.scaling_keys import ADAPTER_KEEP_ALIVE, SLO_TTFT

__all__ = [
    "ENABLED_LABEL",
    "SERVICE_NAME_LABEL",
    "Routing",
    "build_targets",
    "endpoints_from_slices",
    "target_from_deployment",
]

ENABLED_LABEL = "autoscaling.tidal.dev/enabled"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"

Obj = Mapping[str, Any]


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


def _adapters(
    declared: tuple[Adapter, ...],
    configmap: str | None,
    configmaps: Mapping[str, Obj],
    namespace: str,
    base_models: tuple[str, ...],
) -> tuple[tuple[Adapter, ...], str | None]:
    """The declared adapters (the annotation's, then the ConfigMap's) and the problem
    of the ConfigMap's data, if any (the annotation wins a name both declare)."""
    adapters = {a.name: a for a in declared}
    problem = None
    if configmap is not None:
        data = (configmaps.get(f"{namespace}/{configmap}") or {}).get("data")
        where = f"ConfigMap {namespace}/{configmap}"
        try:
            if not isinstance(data, Mapping):
                raise ValueError(f"no ConfigMap {namespace}/{configmap} with data")
            found = adapter_pairs(data, base_models=base_models, where=where)
            adapters.update((a.name, a) for a in found if a.name not in adapters)
        except ValueError as exc:
            problem = (
                f"annotation {ROUTING_PREFIX}adapters-configmap={configmap!r}: the ConfigMap's "
                f"adapters are not used; allowed: a ConfigMap of name: source ({exc})"
            )
    return tuple(sorted(adapters.values(), key=lambda a: a.name)), problem


def _keep_alive_s(notes: Mapping[str, str]) -> float:
    """How long an idle adapter stays loaded: a bad value keeps the default (the
    scaler, which reads the key with the same grammar, raises the Event)."""
    text = notes.get(ADAPTER_KEEP_ALIVE.name)
    try:
        return ADAPTER_KEEP_ALIVE.parse(text) if text is not None else DEFAULT_ADAPTER_KEEP_ALIVE_S
    except ValueError:
        return DEFAULT_ADAPTER_KEEP_ALIVE_S


def _counts_tokens(notes: Mapping[str, str]) -> bool:
    """A model with a TTFT objective is sized in prompt tokens: its requests' token
    estimates are worth counting (an objective the scaler refuses sizes nothing)."""
    text = notes.get(SLO_TTFT.name)
    try:
        return text is not None and SLO_TTFT.parse(text) > 0
    except ValueError:
        return False


def target_from_deployment(deployment: Obj, configmaps: Mapping[str, Obj] | None = None) -> Routing:
    """``configmaps`` by ``namespace/name``: where ``adapters-configmap`` is looked up."""
    meta = _meta(deployment)
    name = key_of(deployment)
    notes: Mapping[str, str] = meta.get("annotations") or {}
    read = read_routing(notes)
    problems = [f"{name}: {problem}" for problem in read.problems]
    namespace = str(meta.get("namespace", ""))
    adapters, configmap_problem = _adapters(
        read.adapters, read.adapters_configmap, configmaps or {}, namespace, read.models
    )
    if configmap_problem is not None:
        problems.append(f"{name}: {configmap_problem}")
    spec = TargetSpec(
        name=name,
        hosts=read.hosts,
        path_prefix=read.path_prefix,
        models=read.models,
        container_concurrency=read.container_concurrency,
        cold_start_timeout_s=read.cold_start_timeout_s,
        max_buffered=read.max_buffered,
        balancing=read.balancing,
        resend_unanswered=read.resend_unanswered,
        counts_tokens=_counts_tokens(notes),
        adapters=adapters,
        adapter_keep_alive_s=_keep_alive_s(notes),
        default_priority=read.default_priority,
        shed_at_zero=read.shed_at_zero,
    )
    service = read.service or str(meta.get("name", ""))
    return Routing(spec=spec, service=service, port=read.port, problems=tuple(problems))


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
