"""Server-side Tables: the columns ``kubectl get`` prints.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` and prints
what comes back; without a Table it shows only NAME and AGE. Each kind gets
the columns the real printers (``pkg/printers/internalversion``) give it, with
the same wording of cells (``1/1``, ``Running``, ``<none>``, ages as
``HumanDuration`` prints them). Columns of priority 1 show with ``-o wide``.
A custom kind gets its CRD's printer columns (``crd_columns``).

``includeObject`` decides what rides along each row: ``None``, ``Metadata``
(a ``PartialObjectMetadata``, the default) or the whole ``Object``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from loadtests.sandbox.cluster.crd_columns import custom_printer
from loadtests.sandbox.cluster.resources import ResourceType
from loadtests.sandbox.cluster.selectors import selector_string
from loadtests.sandbox.cluster.store import parse_rfc3339

__all__ = ["human_duration", "table_for", "wants_table"]

Obj = dict[str, Any]
Column = tuple[str, str, str, int]  # name, type, format, priority


def wants_table(accept: str) -> bool:
    for clause in accept.split(","):
        params = {p.strip() for p in clause.split(";")[1:]}
        if {"as=Table", "g=meta.k8s.io"} <= params and ("v=v1" in params or "v=v1beta1" in params):
            return True
    return False


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration`` from apimachinery."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(value: Any, now: datetime) -> str:
    when = parse_rfc3339(value)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def _meta(obj: Obj) -> Obj:
    meta: Obj = obj.get("metadata") or {}
    return meta


def _labels_string(selector: Any) -> str:
    return selector_string(selector) or "<none>"


def _containers(spec: Obj) -> tuple[str, str]:
    containers = (spec.get("template") or {}).get("spec", {}).get("containers") or []
    names = ",".join(str(c.get("name", "")) for c in containers)
    images = ",".join(str(c.get("image", "")) for c in containers)
    return names, images


# --- per kind -----------------------------------------------------------------------

_NAME: Column = ("Name", "string", "name", 0)
_AGE: Column = ("Age", "string", "", 0)


def _pod(obj: Obj, now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    meta = _meta(obj)
    total = len(spec.get("containers") or [])
    ready = 0
    restarts = 0
    last_restart: datetime | None = None
    reason = status.get("reason") or status.get("phase") or "Pending"
    for cs in status.get("containerStatuses") or []:
        restarts += int(cs.get("restartCount") or 0)
        finished = parse_rfc3339(
            ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        )
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
        elif state.get("terminated"):
            term = state["terminated"]
            reason = (
                f"Signal:{term['signal']}"
                if term.get("signal")
                else f"ExitCode:{term.get('exitCode', 0)}"
            )
        elif state.get("running") is not None and cs.get("ready"):
            ready += 1
    if meta.get("deletionTimestamp"):
        reason = "Terminating"
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        met = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gates_cell = f"{met}/{len(gates)}"
    return [
        meta.get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        _age(meta.get("creationTimestamp"), now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_cell,
    ]


_POD_COLUMNS: list[Column] = [
    _NAME,
    ("Ready", "string", "", 0),
    ("Status", "string", "", 0),
    ("Restarts", "string", "", 0),
    _AGE,
    ("IP", "string", "", 1),
    ("Node", "string", "", 1),
    ("Nominated Node", "string", "", 1),
    ("Readiness Gates", "string", "", 1),
]


def _workload_row(obj: Obj, now: datetime, counts: list[Any]) -> list[Any]:
    """A Deployment's or ReplicaSet's row: name, its replica ``counts``, age, then the wide part."""
    spec, meta = obj.get("spec") or {}, _meta(obj)
    names, images = _containers(spec)
    return [
        meta.get("name", ""),
        *counts,
        _age(meta.get("creationTimestamp"), now),
        names,
        images,
        _labels_string(spec.get("selector")),
    ]


def _workload_columns(counts: list[Column]) -> list[Column]:
    return [
        _NAME,
        *counts,
        _AGE,
        ("Containers", "string", "", 1),
        ("Images", "string", "", 1),
        ("Selector", "string", "", 1),
    ]


def _deployment(obj: Obj, now: datetime) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return _workload_row(
        obj,
        now,
        [
            f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
            int(status.get("updatedReplicas", 0)),
            int(status.get("availableReplicas", 0)),
        ],
    )


_DEPLOYMENT_COLUMNS = _workload_columns(
    [
        ("Ready", "string", "", 0),
        ("Up-to-date", "integer", "", 0),
        ("Available", "integer", "", 0),
    ]
)


def _replicaset(obj: Obj, now: datetime) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return _workload_row(
        obj,
        now,
        [
            int(spec.get("replicas", 1)),
            int(status.get("replicas", 0)),
            int(status.get("readyReplicas", 0)),
        ],
    )


_REPLICASET_COLUMNS = _workload_columns(
    [
        ("Desired", "integer", "", 0),
        ("Current", "integer", "", 0),
        ("Ready", "integer", "", 0),
    ]
)


def _node(obj: Obj, now: datetime) -> list[Any]:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    ready = "Unknown"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = "Ready" if cond.get("status") == "True" else "NotReady"
    if ready == "Unknown" and not status.get("conditions"):
        ready = "Unknown"
    if spec.get("unschedulable"):
        ready += ",SchedulingDisabled"
    roles = sorted(
        key.split("/", 1)[1]
        for key in (meta.get("labels") or {})
        if key.startswith("node-role.kubernetes.io/") and "/" in key
    )
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        meta.get("name", ""),
        ready,
        ",".join(roles) or "<none>",
        _age(meta.get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


_NODE_COLUMNS: list[Column] = [
    _NAME,
    ("Status", "string", "", 0),
    ("Roles", "string", "", 0),
    _AGE,
    ("Version", "string", "", 0),
    ("Internal-IP", "string", "", 1),
    ("External-IP", "string", "", 1),
    ("OS-Image", "string", "", 1),
    ("Kernel-Version", "string", "", 1),
    ("Container-Runtime", "string", "", 1),
]


def _service(obj: Obj, now: datetime) -> list[Any]:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    kind = spec.get("type") or "ClusterIP"
    external = "<none>"
    if kind == "LoadBalancer":
        ingress = (status.get("loadBalancer") or {}).get("ingress") or []
        external = ",".join(i.get("ip") or i.get("hostname") or "" for i in ingress) or "<pending>"
    elif kind == "ExternalName":
        external = spec.get("externalName") or "<none>"
    ports = []
    for port in spec.get("ports") or []:
        proto = port.get("protocol", "TCP")
        if port.get("nodePort"):
            ports.append(f"{port.get('port')}:{port['nodePort']}/{proto}")
        else:
            ports.append(f"{port.get('port')}/{proto}")
    return [
        meta.get("name", ""),
        kind,
        spec.get("clusterIP") or "<none>",
        external,
        ",".join(ports) or "<none>",
        _age(meta.get("creationTimestamp"), now),
        _labels_string(spec.get("selector")),
    ]


_SERVICE_COLUMNS: list[Column] = [
    _NAME,
    ("Type", "string", "", 0),
    ("Cluster-IP", "string", "", 0),
    ("External-IP", "string", "", 0),
    ("Port(s)", "string", "", 0),
    _AGE,
    ("Selector", "string", "", 1),
]


def _endpointslice(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    ports = [str(p.get("port")) for p in obj.get("ports") or [] if p.get("port") is not None]
    addresses = [a for e in obj.get("endpoints") or [] for a in e.get("addresses") or []]
    shown = ",".join(addresses[:3]) if addresses else "<unset>"
    if len(addresses) > 3:
        shown += f" + {len(addresses) - 3} more..."
    return [
        meta.get("name", ""),
        obj.get("addressType", ""),
        ",".join(ports) or "<unset>",
        shown,
        _age(meta.get("creationTimestamp"), now),
    ]


_ENDPOINTSLICE_COLUMNS: list[Column] = [
    _NAME,
    ("AddressType", "string", "", 0),
    ("Ports", "string", "", 0),
    ("Endpoints", "string", "", 0),
    _AGE,
]


def _event(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    # core field names; events.k8s.io objects are converted to core before printing
    involved = obj.get("involvedObject") or {}
    last = obj.get("lastTimestamp") or (obj.get("series") or {}).get("lastObservedTime")
    last = last or obj.get("eventTime") or meta.get("creationTimestamp")
    first = obj.get("firstTimestamp") or obj.get("eventTime") or meta.get("creationTimestamp")
    source = obj.get("source") or {}
    source_text = source.get("component") or obj.get("reportingComponent") or ""
    if source.get("host"):
        source_text += f", {source['host']}"
    count = obj.get("count") or (obj.get("series") or {}).get("count") or 1
    kind = str(involved.get("kind", "")).lower()
    return [
        _age(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{kind}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        source_text,
        obj.get("message", ""),
        _age(first, now),
        int(count),
        meta.get("name", ""),
    ]


_EVENT_COLUMNS: list[Column] = [
    ("Last Seen", "string", "", 0),
    ("Type", "string", "", 0),
    ("Reason", "string", "", 0),
    ("Object", "string", "", 0),
    ("Subobject", "string", "", 1),
    ("Source", "string", "", 1),
    ("Message", "string", "", 0),
    ("First Seen", "string", "", 1),
    ("Count", "string", "", 1),
    ("Name", "string", "", 1),
]


def _namespace(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    return [
        meta.get("name", ""),
        (obj.get("status") or {}).get("phase", "Active"),
        _age(meta.get("creationTimestamp"), now),
    ]


def _lease(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    return [
        meta.get("name", ""),
        (obj.get("spec") or {}).get("holderIdentity", ""),
        _age(meta.get("creationTimestamp"), now),
    ]


def _service_account(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    return [
        meta.get("name", ""),
        len(obj.get("secrets") or []),
        _age(meta.get("creationTimestamp"), now),
    ]


def _configmap(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    data = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [meta.get("name", ""), data, _age(meta.get("creationTimestamp"), now)]


def _secret(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    data = len(obj.get("data") or {}) + len(obj.get("stringData") or {})
    return [
        meta.get("name", ""),
        obj.get("type", "Opaque"),
        data,
        _age(meta.get("creationTimestamp"), now),
    ]


def _role(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    return [meta.get("name", ""), meta.get("creationTimestamp", "")]


def _binding(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    ref = obj.get("roleRef") or {}
    subjects = obj.get("subjects") or []

    def names(kind: str) -> str:
        return ", ".join(
            (
                f"{s.get('namespace', '')}/{s.get('name', '')}"
                if kind == "ServiceAccount"
                else s.get("name", "")
            )
            for s in subjects
            if s.get("kind") == kind
        )

    return [
        meta.get("name", ""),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(meta.get("creationTimestamp"), now),
        names("User"),
        names("Group"),
        names("ServiceAccount"),
    ]


_BINDING_COLUMNS: list[Column] = [
    _NAME,
    ("Role", "string", "", 0),
    _AGE,
    ("Users", "string", "", 1),
    ("Groups", "string", "", 1),
    ("ServiceAccounts", "string", "", 1),
]


def _default(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    return [meta.get("name", ""), meta.get("creationTimestamp", "")]


def _network_policy(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    return [
        meta.get("name", ""),
        _labels_string((obj.get("spec") or {}).get("podSelector")),
        _age(meta.get("creationTimestamp"), now),
    ]


def _disruption_budget(obj: Obj, now: datetime) -> list[Any]:
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return [
        meta.get("name", ""),
        str(spec["minAvailable"]) if "minAvailable" in spec else "N/A",
        str(spec["maxUnavailable"]) if "maxUnavailable" in spec else "N/A",
        # Nothing in the sandbox evicts, and no controller fills the status.
        status.get("disruptionsAllowed", 0),
        _age(meta.get("creationTimestamp"), now),
    ]


_DEFAULT_COLUMNS: list[Column] = [_NAME, ("Created At", "date", "", 0)]

_PRINTERS: dict[str, tuple[list[Column], Callable[[Obj, datetime], list[Any]]]] = {
    "Pod": (_POD_COLUMNS, _pod),
    "Deployment": (_DEPLOYMENT_COLUMNS, _deployment),
    "ReplicaSet": (_REPLICASET_COLUMNS, _replicaset),
    "Node": (_NODE_COLUMNS, _node),
    "Service": (_SERVICE_COLUMNS, _service),
    "EndpointSlice": (_ENDPOINTSLICE_COLUMNS, _endpointslice),
    "Event": (_EVENT_COLUMNS, _event),
    "Namespace": ([_NAME, ("Status", "string", "", 0), _AGE], _namespace),
    "Lease": ([_NAME, ("Holder", "string", "", 0), _AGE], _lease),
    "ServiceAccount": ([_NAME, ("Secrets", "integer", "", 0), _AGE], _service_account),
    "ConfigMap": ([_NAME, ("Data", "integer", "", 0), _AGE], _configmap),
    "Secret": ([_NAME, ("Type", "string", "", 0), ("Data", "integer", "", 0), _AGE], _secret),
    "Role": ([_NAME, ("Created At", "string", "", 0)], _role),
    "ClusterRole": ([_NAME, ("Created At", "string", "", 0)], _role),
    "RoleBinding": (_BINDING_COLUMNS, _binding),
    "ClusterRoleBinding": (_BINDING_COLUMNS, _binding),
    "NetworkPolicy": ([_NAME, ("Pod-Selector", "string", "", 0), _AGE], _network_policy),
    "PodDisruptionBudget": (
        [
            _NAME,
            ("Min Available", "string", "", 0),
            ("Max Unavailable", "string", "", 0),
            ("Allowed Disruptions", "integer", "", 0),
            _AGE,
        ],
        _disruption_budget,
    ),
}


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def table_for(
    rtype: ResourceType,
    objects: list[Obj],
    *,
    resource_version: str,
    include_object: str = "Metadata",
    headers: bool = True,
    continue_token: str | None = None,
    remaining: int | None = None,
    now: datetime | None = None,
    row_source: Callable[[Obj], Obj] | None = None,
) -> Obj:
    """A ``meta.k8s.io/v1`` Table of ``objects`` (in the wire form clients asked for).

    ``row_source`` maps an object to the form its printer reads (events.k8s.io
    Events are printed from their core form).
    """
    now = now or datetime.now(UTC)
    columns, printer = custom_printer(
        rtype.group, rtype.version, rtype.kind, age=_age
    ) or _PRINTERS.get(rtype.kind, (_DEFAULT_COLUMNS, _default))
    rows = []
    for obj in objects:
        printed = row_source(obj) if row_source else obj
        row: Obj = {"cells": printer(printed, now)}
        attached = _row_object(obj, include_object)
        if attached is not None:
            row["object"] = attached
        rows.append(row)
    metadata: Obj = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    if remaining:
        metadata["remainingItemCount"] = remaining
    table: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}
    table["columnDefinitions"] = (
        [
            {"name": n, "type": t, "format": f, "description": n, "priority": p}
            for n, t, f, p in columns
        ]
        if headers
        else None
    )
    table["rows"] = rows
    return table
