"""Defaulting: the fields the real API server fills when a client leaves them out.

Clients read these back (``kubectl rollout status`` reads the strategy,
controllers read ``spec.replicas``), so a Deployment created without them
must come back with them, as on a real cluster. Only the defaults that
something reads are here: Deployment/ReplicaSet replicas, strategy,
revision history and progress deadline; pod spec restart/DNS/scheduler/grace
fields; container pull policy, termination message fields, probe timings
and port protocols; Service type, session affinity, port protocol and targetPort;
Namespace phase; a new Pod's ``Pending`` phase; a Secret's ``Opaque`` type and
its ``stringData`` folded into ``data`` (a write-only field, never read back).

Defaulting runs on every write that decodes an object (create, update,
patch), as the real server's does; each default is idempotent.
"""

from __future__ import annotations

import base64
from typing import Any

__all__ = ["apply_defaults"]

Obj = dict[str, Any]


def _container(c: Obj) -> None:
    image = str(c.get("image") or "")
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c:
        latest = "@" not in image and (":" not in tag or tag.endswith(":latest"))
        c["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for probe_key in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = c.get(probe_key)
        if isinstance(probe, dict):
            _probe(probe)
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def _probe(probe: Obj) -> None:
    # The real defaults (kubectl describe prints them): 1 s timeout, 10 s
    # period, one success, three failures; httpGet over plain HTTP.
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    http_get = probe.get("httpGet")
    if isinstance(http_get, dict):
        http_get.setdefault("scheme", "HTTP")
        http_get.setdefault("path", "/")


def _pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _container(c)


def _workload(spec: Obj, *, deployment: bool) -> None:
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    if deployment:
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        if isinstance(strategy, dict):
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                rolling = strategy.setdefault("rollingUpdate", {})
                if isinstance(rolling, dict):
                    rolling.setdefault("maxUnavailable", "25%")
                    rolling.setdefault("maxSurge", "25%")
    template = spec.get("template")
    if isinstance(template, dict):
        template_meta = template.setdefault("metadata", {})
        if isinstance(template_meta, dict):
            template_meta.setdefault("creationTimestamp", None)
        pod_spec = template.get("spec")
        if isinstance(pod_spec, dict):
            _pod_spec(pod_spec)


def apply_defaults(obj: Obj, kind: str, *, creating: bool) -> None:
    spec = obj.get("spec")
    if kind in ("Deployment", "ReplicaSet") and isinstance(spec, dict):
        _workload(spec, deployment=kind == "Deployment")
    elif kind == "Pod" and isinstance(spec, dict):
        _pod_spec(spec)
        if creating:
            status = obj.setdefault("status", {})
            if isinstance(status, dict):
                status.setdefault("phase", "Pending")
                status.setdefault("qosClass", "BestEffort")
    elif kind == "Service" and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
        plain = obj.pop("stringData", None)
        if isinstance(plain, dict) and plain:
            data = obj.setdefault("data", {})
            for key, value in plain.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
    elif kind == "Namespace" and creating:
        obj.setdefault("status", {}).setdefault("phase", "Active")
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("finalizers", ["kubernetes"])
