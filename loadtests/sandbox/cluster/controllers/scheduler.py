"""The scheduler: binds pending pods to nodes with the real filters and wording.

For each pod with no ``spec.nodeName`` (and the default scheduler), every
node goes through the default plugins' filters in the real order, and the
first one that fails names the node's reason:

1. NodeUnschedulable: ``spec.unschedulable`` (cordoned) unless the pod
   tolerates ``node.kubernetes.io/unschedulable`` -> "node(s) were unschedulable";
2. TaintToleration: a ``NoSchedule``/``NoExecute`` taint the pod does not
   tolerate (``Equal``/``Exists``, empty key with ``Exists`` tolerates
   everything, empty effect matches every effect) ->
   "node(s) had untolerated taint {key: value}";
3. NodeAffinity: ``nodeSelector`` and required node affinity
   (``nodeSelectorTerms`` ORed, ``matchExpressions`` ANDed with
   In/NotIn/Exists/DoesNotExist/Gt/Lt, ``matchFields`` on ``metadata.name``)
   -> "node(s) didn't match Pod's node affinity/selector";
4. NodeResourcesFit: requests (containers summed, init containers as a max;
   requests default to limits) of the pods on the node plus this one against
   ``status.allocatable`` -> "Insufficient nvidia.com/gpu", "Insufficient cpu",
   ..., and "Too many pods".

5. PodTopologySpread (``whenUnsatisfiable: DoNotSchedule``): placing the
   pod in the node's domain (``topologyKey``, such as the zone) would make
   the count of matching pods exceed the least-loaded domain's by more than
   ``maxSkew`` -> "node(s) didn't match pod topology spread constraints";
6. the cloud's spot capacity (:meth:`Scheduler.set_spot_capacity`): spot
   GPUs the cloud will give out in all, so that spot can run out. A spot
   node past it reads as "Insufficient nvidia.com/gpu", which is what a
   real cluster shows while its autoscaler cannot get spot machines.

A pod that fits nowhere stays Pending with ``PodScheduled=False``, reason
``Unschedulable`` and the real message, e.g. ``0/6 nodes are available: 2
Insufficient nvidia.com/gpu, 4 node(s) had untolerated taint {k: v}.
preemption: 0/6 nodes are available: 2 No preemption victims found for
incoming pod, 4 Preemption is not helpful for scheduling.`` (there are no
priorities here, so preemption never finds victims), plus a
``FailedScheduling`` Warning event. It is retried whenever a node changes or a
pod releases resources, as the real scheduling queue moves unschedulable pods
back on cluster events.

Among the nodes that fit, the pod goes where its preferred node affinity
(``preferredDuringSchedulingIgnoredDuringExecution``) weighs most (the real
NodeAffinity score: the weights of the terms the node matches, which at a
term's full weight outscores the resource fit), then to the domain with the fewest
matching pods of its ``ScheduleAnyway`` spread constraints, then where the
fewest pods of its owner already run (the default topology spreading), then to the least allocated
node (the GPU devices it asks for, ``nvidia.com/gpu`` or a MIG profile such
as ``nvidia.com/mig-3g.40gb``, then CPU, then memory; the default
``LeastAllocated`` score), then by name, so placement is deterministic.
Extended resources of any name are counted like ``nvidia.com/gpu``: a pod
asking for ``nvidia.com/mig-3g.40gb: 1`` goes only where one is free, and
waits Pending with ``Insufficient nvidia.com/mig-3g.40gb`` otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from loadtests.sandbox.cluster.controllers.base import (
    NODES,
    PODS,
    Cache,
    Controller,
    EventRecorder,
    Key,
    Obj,
    controller_uid,
    set_condition,
)
from loadtests.sandbox.cluster.errors import NotFound
from loadtests.sandbox.cluster.quantity import parse_quantity
from loadtests.sandbox.cluster.selectors import selector_from_object
from loadtests.sandbox.cluster.store import Store

__all__ = [
    "GPU",
    "Scheduler",
    "node_filter_failures",
    "pod_requests",
    "tolerates",
    "unschedulable_message",
]

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
SPREAD_MISMATCH = "node(s) didn't match pod topology spread constraints"


def _container_requests(container: Mapping[str, Any]) -> dict[str, float]:
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})  # requests default to limits
    return {name: parse_quantity(value) for name, value in merged.items()}


def pod_requests(pod: Obj) -> dict[str, float]:
    """What the pod asks of a node: containers summed, the largest init container as a floor."""
    spec = pod.get("spec", {})
    total: dict[str, float] = {}
    for container in spec.get("containers") or ():
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, 0.0) + value
    for container in spec.get("initContainers") or ():
        for name, value in _container_requests(container).items():
            total[name] = max(total.get(name, 0.0), value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0.0) + parse_quantity(value)
    return total


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        operator = tol.get("operator") or "Equal"
        key = tol.get("key") or ""
        if operator == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    operator = expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        try:
            have, want = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if operator == "Gt" else have < want
    return False


def _matches_node_affinity(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec", {})
    labels = node["metadata"].get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue  # an empty term matches nothing
        if all(_expression_matches(e, labels.get(e.get("key", ""))) for e in exprs) and all(
            _expression_matches(
                f, node["metadata"]["name"] if f.get("key") == "metadata.name" else None
            )
            for f in fields
        ):
            return True
    return False


def preferred_weight(pod: Obj, node: Obj) -> int:
    """The summed weights of the pod's preferred node affinity terms the node matches."""
    labels = node["metadata"].get("labels") or {}
    terms = ((pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or []
    total = 0
    for term in terms:
        exprs = (term.get("preference") or {}).get("matchExpressions") or []
        if exprs and all(_expression_matches(e, labels.get(e.get("key", ""))) for e in exprs):
            total += int(term.get("weight") or 0)
    return total


def node_filter_failures(
    pod: Obj, node: Obj, *, requested: Mapping[str, float], pod_count: int
) -> list[str]:
    """Why ``pod`` cannot go to ``node`` (empty: it fits), as the first failing filter says."""
    tolerations = pod.get("spec", {}).get("tolerations") or []
    node_spec = node.get("spec", {})
    if node_spec.get("unschedulable") and not tolerates(
        tolerations, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    ):
        return ["node(s) were unschedulable"]
    for taint in node_spec.get("taints") or ():
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not tolerates(tolerations, taint):
            key, value = taint.get("key", ""), taint.get("value", "")
            return [f"node(s) had untolerated taint {{{key}: {value}}}"]
    if not _matches_node_affinity(pod, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    allocatable = node.get("status", {}).get("allocatable") or {}
    failures = []
    max_pods = parse_quantity(allocatable.get("pods", 110))
    if pod_count + 1 > max_pods:
        failures.append("Too many pods")
    wants = pod_requests(pod)
    for name in sorted(wants):
        want = wants[name]
        if want <= 0:
            continue
        have = parse_quantity(allocatable[name]) if name in allocatable else 0.0
        if requested.get(name, 0.0) + want > have + 1e-9:
            failures.append(f"Insufficient {name}")
    return failures


def unschedulable_message(
    total_nodes: int, reasons: Mapping[str, int], preempt: Mapping[str, int]
) -> str:
    """The scheduler's FitError text, reason counts sorted as the real one sorts them."""
    main = sorted(f"{count} {reason}" for reason, count in reasons.items())
    text = f"0/{total_nodes} nodes are available: {', '.join(main)}."
    if preempt:
        extra = sorted(f"{count} {reason}" for reason, count in preempt.items())
        text += f" preemption: 0/{total_nodes} nodes are available: {', '.join(extra)}."
    return text


def _counts_on_node(pod: Obj) -> bool:
    return bool(pod.get("spec", {}).get("nodeName")) and pod.get("status", {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _is_spot(node: Obj) -> bool:
    return bool((node["metadata"].get("labels") or {}).get(CAPACITY_TYPE) == "spot")


def _spread_counts(
    pod: Obj, constraint: Mapping[str, Any], nodes: Iterable[Obj], pods: Iterable[Obj]
) -> dict[str, int]:
    """Matching pods per domain of ``constraint``, over the nodes that have the key."""
    key = constraint.get("topologyKey", "")
    domain_of = {
        n["metadata"]["name"]: (n["metadata"].get("labels") or {})[key]
        for n in nodes
        if key in (n["metadata"].get("labels") or {})
    }
    counts = dict.fromkeys(domain_of.values(), 0)
    selector = selector_from_object(constraint.get("labelSelector") or {})
    namespace = pod["metadata"]["namespace"]
    for other in pods:
        node = other.get("spec", {}).get("nodeName")
        if (
            node in domain_of
            and other["metadata"].get("namespace") == namespace
            and not other["metadata"].get("deletionTimestamp")
            and _counts_on_node(other)
            and selector.matches(other["metadata"].get("labels"))
        ):
            counts[domain_of[node]] += 1
    return counts


class Scheduler(Controller):
    name = "default-scheduler"

    def __init__(self, store: Store, cache: Cache, *, recorder: EventRecorder) -> None:
        super().__init__(store, cache)
        self.recorder = recorder
        # What each node has promised: resource -> amount, and pod counts.
        self._requested: dict[str, dict[str, float]] = {}
        self._pods_on: dict[str, int] = {}
        self._contrib: dict[str, tuple[str, dict[str, float]]] = {}  # pod uid -> (node, requests)
        self._unschedulable: set[Key] = set()
        self.spot_capacity_gpus: float | None = None  # None: the cloud never runs out
        cache.on(PODS, self._on_pod)
        cache.on(NODES, self._on_node)
        for pod in store.list(PODS, copy=False)[0]:
            self._account(None, pod)
            if self._wants_scheduling(pod):
                self.queue.add((pod["metadata"]["namespace"], pod["metadata"]["name"]))

    @staticmethod
    def _wants_scheduling(pod: Obj) -> bool:
        spec = pod.get("spec", {})
        return (
            not spec.get("nodeName")
            and spec.get("schedulerName", "default-scheduler") == "default-scheduler"
            and not pod["metadata"].get("deletionTimestamp")
            and pod.get("status", {}).get("phase", "Pending") == "Pending"
        )

    def _account(self, old: Obj | None, new: Obj | None) -> bool:
        """Track node usage; True when resources were released somewhere."""
        released = False
        if old is not None:
            uid = old["metadata"]["uid"]
            if uid in self._contrib and (new is None or not _counts_on_node(new)):
                node, reqs = self._contrib.pop(uid)
                usage = self._requested.setdefault(node, {})
                for name, value in reqs.items():
                    usage[name] = usage.get(name, 0.0) - value
                self._pods_on[node] = self._pods_on.get(node, 1) - 1
                released = True
        if new is not None and _counts_on_node(new):
            uid = new["metadata"]["uid"]
            if uid not in self._contrib:
                node = new["spec"]["nodeName"]
                try:
                    reqs = pod_requests(new)
                except ValueError:
                    reqs = {}
                self._contrib[uid] = (node, reqs)
                usage = self._requested.setdefault(node, {})
                for name, value in reqs.items():
                    usage[name] = usage.get(name, 0.0) + value
                self._pods_on[node] = self._pods_on.get(node, 0) + 1
        return released

    def _on_pod(self, _event: str, old: Obj | None, new: Obj | None) -> None:
        if self._account(old, new):
            self._retry_unschedulable()
        if new is not None and self._wants_scheduling(new):
            key = (new["metadata"]["namespace"], new["metadata"]["name"])
            # An unschedulable pod waits for a cluster change, not for its own updates.
            if key not in self._unschedulable:
                self.queue.add(key)
        elif new is None and old is not None:
            self._unschedulable.discard((old["metadata"]["namespace"], old["metadata"]["name"]))

    def _on_node(self, _event: str, _old: Obj | None, _new: Obj | None) -> None:
        self._retry_unschedulable()

    def _retry_unschedulable(self) -> None:
        for key in self._unschedulable:
            self.queue.add(key)
        self._unschedulable.clear()

    def set_spot_capacity(self, gpus: float | None) -> None:
        """Spot GPUs the cloud gives out in all (``None``: no limit); Pending pods retry."""
        if gpus is not None and gpus < 0:
            raise ValueError(f"spot capacity must be >= 0 GPUs or unlimited, got {gpus}")
        self.spot_capacity_gpus = gpus
        self._retry_unschedulable()

    def spot_gpus_in_use(self) -> float:
        return sum(
            self._requested.get(n["metadata"]["name"], {}).get(GPU, 0.0)
            for n in self.store.list(NODES, copy=False)[0]
            if _is_spot(n)
        )

    def _extra_failures(self, pod: Obj, node: Obj, nodes: list[Obj], spot_used: float) -> list[str]:
        """The filters beyond node_filter_failures: spread (DoNotSchedule), the spot capacity."""
        for constraint in pod.get("spec", {}).get("topologySpreadConstraints") or ():
            if constraint.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            key = constraint.get("topologyKey", "")
            domain = (node["metadata"].get("labels") or {}).get(key)
            if domain is None:
                return [SPREAD_MISMATCH]
            # Domains are those of the nodes the pod may go to (nodeAffinityPolicy: Honor).
            eligible = [n for n in nodes if _matches_node_affinity(pod, n)]
            counts = _spread_counts(pod, constraint, eligible, self.store.list(PODS, copy=False)[0])
            if counts[domain] + 1 - min(counts.values()) > int(constraint.get("maxSkew", 1)):
                return [SPREAD_MISMATCH]
        if self.spot_capacity_gpus is not None and _is_spot(node):
            want = pod_requests(pod).get(GPU, 0.0)
            if want > 0 and spot_used + want > self.spot_capacity_gpus + 1e-9:
                return [f"Insufficient {GPU}"]
        return []

    def requested_on(self, node: str) -> dict[str, float]:
        return dict(self._requested.get(node, {}))

    def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        pod = self.store.peek(PODS, namespace, name)
        if pod is None or not self._wants_scheduling(pod):
            return None
        nodes = self.store.list(NODES, copy=False)[0]
        reasons: dict[str, int] = {}
        preempt: dict[str, int] = {}
        feasible: list[Obj] = []
        spot_used = self.spot_gpus_in_use() if self.spot_capacity_gpus is not None else 0.0
        try:
            for node in nodes:
                node_name = node["metadata"]["name"]
                failures = node_filter_failures(
                    pod,
                    node,
                    requested=self._requested.get(node_name, {}),
                    pod_count=self._pods_on.get(node_name, 0),
                ) or self._extra_failures(pod, node, nodes, spot_used)
                if not failures:
                    feasible.append(node)
                    continue
                for failure in failures:
                    reasons[failure] = reasons.get(failure, 0) + 1
                fit_failure = failures[0].startswith(("Insufficient", "Too many pods"))
                bucket = NO_VICTIMS if fit_failure else NOT_HELPFUL
                preempt[bucket] = preempt.get(bucket, 0) + 1
        except ValueError as exc:  # an unparseable quantity in the pod
            self._mark_unschedulable(pod, f"invalid resource request: {exc}")
            return None
        if not feasible:
            if not nodes:
                message = "no nodes available to schedule pods"
            else:
                message = unschedulable_message(len(nodes), reasons, preempt)
            self._mark_unschedulable(pod, message)
            return None
        self._bind(pod, self._choose(pod, feasible))
        return None

    def _choose(self, pod: Obj, nodes: list[Obj]) -> Obj:
        owner = controller_uid(pod)
        siblings: dict[str, int] = {}
        if owner is not None:
            for other in self.cache.by(PODS, "owner", owner):
                node = other.get("spec", {}).get("nodeName")
                if node:
                    siblings[node] = siblings.get(node, 0) + 1

        def fraction(node: Obj, resource: str) -> float:
            have = parse_quantity(
                (node.get("status", {}).get("allocatable") or {}).get(resource, 0)
            )
            used = self._requested.get(node["metadata"]["name"], {}).get(resource, 0.0)
            return used / have if have > 0 else 0.0

        soft = [
            c
            for c in pod.get("spec", {}).get("topologySpreadConstraints") or ()
            if c.get("whenUnsatisfiable") == "ScheduleAnyway"
        ]
        all_pods = self.store.list(PODS, copy=False)[0] if soft else []
        spread = [(c.get("topologyKey", ""), _spread_counts(pod, c, nodes, all_pods)) for c in soft]
        # The GPU devices the pod asks for (a MIG profile is its own resource).
        devices = [r for r in pod_requests(pod) if r == GPU or r.startswith(MIG_PREFIX)] or [GPU]

        def spread_score(node: Obj) -> int:
            labels = node["metadata"].get("labels") or {}
            return sum(counts.get(labels.get(key, ""), 0) for key, counts in spread)

        return min(
            nodes,
            key=lambda n: (
                -preferred_weight(pod, n),
                spread_score(n),
                siblings.get(n["metadata"]["name"], 0),
                max(fraction(n, r) for r in devices),
                fraction(n, "cpu"),
                fraction(n, "memory"),
                n["metadata"]["name"],
            ),
        )

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        meta = pod["metadata"]
        self._unschedulable.add((meta["namespace"], meta["name"]))
        status = dict(pod.get("status") or {})
        status.setdefault("phase", "Pending")
        status["conditions"] = set_condition(
            status.get("conditions") or [],
            kind="PodScheduled",
            status="False",
            reason="Unschedulable",
            message=message,
            now=self.store.now(),
            with_probe_time=True,
        )
        if status != pod.get("status"):
            self.store.update(PODS, {**pod, "status": status}, subresource="status")
        self.recorder.record(pod, event_type="Warning", reason="FailedScheduling", message=message)

    def _bind(self, pod: Obj, node: Obj) -> None:
        meta = pod["metadata"]
        node_name = node["metadata"]["name"]
        with contextlib.suppress(NotFound):
            bound = self.store.update(PODS, {**pod, "spec": {**pod["spec"], "nodeName": node_name}})
            status = dict(bound.get("status") or {})
            status["conditions"] = set_condition(
                status.get("conditions") or [],
                kind="PodScheduled",
                status="True",
                reason=None,
                message=None,
                now=self.store.now(),
                with_probe_time=True,
            )
            self.store.update(PODS, {**bound, "status": status}, subresource="status")
            self.recorder.record(
                pod,
                event_type="Normal",
                reason="Scheduled",
                message=f"Successfully assigned {meta['namespace']}/{meta['name']} to {node_name}",
            )
