"""deploy/ as an operator applies it: renders, validates, is locked down, and watches itself.

Covers:
- ``kubectl kustomize`` renders deploy/ (core Kubernetes objects only: no
  Prometheus Operator kind, so it applies to a cluster without one) and
  deploy/monitoring/ (PodMonitors, PrometheusRule, the dashboard ConfigMap);
- every core object validates, strictly, against the Kubernetes 1.30 and
  later schemas (kubernetes-validate);
- each workload meets the restricted Pod Security level with a read-only
  root filesystem (the checker is shown to catch each violation too);
- the PodMonitors scrape ports the pods declare, the NetworkPolicies let
  only activators (and Prometheus) reach the scaler's port and let the
  scaler reach DNS, the API server and the pods' metrics ports, a
  PodDisruptionBudget and a topology spread cover each workload;
- ``promtool check rules`` accepts the rules, and ``promtool test rules``
  drives alerts to firing (and not firing) on synthetic series;
- the rules and the dashboard read only metrics the code registers;
- the Dockerfile builds the runtime only: non-root, no compilers, no extras,
  no sandbox;
- the example Deployments validate and carry no ``replicas`` (Tidal owns it).
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client import CollectorRegistry

from activator.metrics import Metrics as ActivatorMetrics
from loadtests.sandbox.cluster.validation import validate_object
from scaler.metrics import Metrics as ScalerMetrics
from tests.integration.deploy.manifests import (
    DEPLOY,
    MONITORING,
    ROOT,
    alerts,
    dashboard,
    referenced_metrics,
    render,
    rule_groups,
    workloads,
)

SCHEMA_VERSIONS = ["1.30.0", "1.31.0", "1.32.0", "1.33.0", kubernetes_validate.latest_version()]


def _kubectl(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name!r} is not installed; it renders deploy/ (kubectl 1.27 or newer)")
    return path


@pytest.fixture(scope="module")
def deploy_objects() -> list[dict[str, Any]]:
    return render(_kubectl, DEPLOY)


@pytest.fixture(scope="module")
def monitoring_objects() -> list[dict[str, Any]]:
    return render(_kubectl, MONITORING)


def _kinds(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objects)


def test_deploy_renders_core_objects_only(deploy_objects: list[dict[str, Any]]) -> None:
    kinds = set(_kinds(deploy_objects))
    assert {"Deployment", "Service", "NetworkPolicy", "PodDisruptionBudget"} <= kinds
    assert not [o for o in deploy_objects if "monitoring.coreos.com" in o["apiVersion"]]
    assert {o["metadata"].get("namespace") for o in deploy_objects if o["kind"] != "Namespace"} - {
        None
    } == {"tidal-system"}


def test_monitoring_renders(monitoring_objects: list[dict[str, Any]]) -> None:
    assert _kinds(monitoring_objects) == ["ConfigMap", "PodMonitor", "PodMonitor", "PrometheusRule"]
    (config_map,) = [o for o in monitoring_objects if o["kind"] == "ConfigMap"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "tidal.json" in config_map["data"]


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_core_objects_validate_against_the_schemas(
    version: str,
    deploy_objects: list[dict[str, Any]],
    monitoring_objects: list[dict[str, Any]],
) -> None:
    core = deploy_objects + [o for o in monitoring_objects if o["kind"] == "ConfigMap"]
    for obj in core:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} on {version}: {exc.message}")


# --- Pod Security: restricted, plus a read-only root -----------------------------

_RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def restricted_problems(workload: dict[str, Any]) -> list[str]:
    """What keeps a workload's pods from the restricted level (with a read-only root)."""
    problems = []
    pod = workload["spec"]["template"]["spec"]
    pod_sc = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            problems.append(f"pod {field}")
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']} of type {sorted(kinds)}")
    for container in (pod.get("initContainers") or []) + pod["containers"]:
        name = container["name"]
        sc = container.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation must be false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"{name}: capabilities must drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: adds capabilities {caps['add']}")
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot must be true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            problems.append(f"{name}: runs as user 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost")
        if not sc.get("readOnlyRootFilesystem"):
            problems.append(f"{name}: readOnlyRootFilesystem must be true")
        if any(port.get("hostPort") for port in container.get("ports") or []):
            problems.append(f"{name}: hostPort")
    return problems


def test_workloads_meet_restricted_pod_security(deploy_objects: list[dict[str, Any]]) -> None:
    found = list(workloads(deploy_objects))
    assert {w["metadata"]["name"] for w in found} == {"tidal-scaler", "tidal-activator"}
    for workload in found:
        assert restricted_problems(workload) == [], workload["metadata"]["name"]


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (("securityContext", "runAsNonRoot"), False, "runAsNonRoot"),
        (("c", "readOnlyRootFilesystem"), False, "readOnlyRootFilesystem"),
        (("c", "allowPrivilegeEscalation"), True, "allowPrivilegeEscalation"),
        (("c", "capabilities"), {"drop": ["NET_RAW"]}, "drop ALL"),
        (("c", "privileged"), True, "privileged"),
        (("c", "seccompProfile"), {"type": "Unconfined"}, "seccompProfile"),
        (("hostNetwork",), True, "hostNetwork"),
        (("volumes",), [{"name": "h", "hostPath": {"path": "/"}}], "hostPath"),
    ],
)
def test_the_pod_security_check_catches_each_violation(
    deploy_objects: list[dict[str, Any]], path: tuple[str, ...], value: object, problem: str
) -> None:
    workload = copy.deepcopy(next(workloads(deploy_objects)))
    pod = workload["spec"]["template"]["spec"]
    if path[0] == "c":
        container = pod["containers"][0]
        container["securityContext"][path[1]] = value
        # The pod-level setting would stand in for a missing container one.
        pod["securityContext"].pop(path[1], None)
    elif len(path) == 2:
        pod[path[0]][path[1]] = value
        for container in pod["containers"]:
            container["securityContext"].pop(path[1], None)
    else:
        pod[path[0]] = value
    assert any(problem in p for p in restricted_problems(workload))


# --- how the pieces fit ------------------------------------------------------------


def _by(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    match = selector.get("matchLabels") or {}
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def _pod_labels(workload: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def _ports(workload: dict[str, Any]) -> dict[str, int]:
    return {
        p["name"]: p["containerPort"]
        for c in workload["spec"]["template"]["spec"]["containers"]
        for p in c.get("ports") or []
    }


def test_pod_monitors_scrape_declared_ports(
    deploy_objects: list[dict[str, Any]], monitoring_objects: list[dict[str, Any]]
) -> None:
    deployments = _by(deploy_objects, "Deployment")
    monitors = _by(monitoring_objects, "PodMonitor")
    wanted = {"tidal-scaler": "http", "tidal-activator": "admin"}
    for name, port in wanted.items():
        monitor = monitors[name]
        assert _selects(monitor["spec"]["selector"], _pod_labels(deployments[name]))
        endpoints = monitor["spec"]["podMetricsEndpoints"]
        assert [e["port"] for e in endpoints] == [port]
        assert port in _ports(deployments[name])


def test_only_activators_and_prometheus_reach_the_scaler(
    deploy_objects: list[dict[str, Any]],
) -> None:
    deployments = _by(deploy_objects, "Deployment")
    policy = _by(deploy_objects, "NetworkPolicy")["tidal-scaler"]["spec"]
    scaler_pod = _pod_labels(deployments["tidal-scaler"])
    assert _selects(policy["podSelector"], scaler_pod)
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    (rule,) = policy["ingress"]
    assert [p["port"] for p in rule["ports"]] == [_ports(deployments["tidal-scaler"])["http"]]
    peers = rule["from"]
    same_namespace = [p for p in peers if "namespaceSelector" not in p]
    assert len(same_namespace) == 1
    assert _selects(same_namespace[0]["podSelector"], _pod_labels(deployments["tidal-activator"]))
    assert not _selects(same_namespace[0]["podSelector"], scaler_pod)
    for peer in peers:
        assert "ipBlock" not in peer
        assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"] in (
            "tidal-activator",
            "prometheus",
        )
    egress_ports = {(p["protocol"], p["port"]) for r in policy["egress"] for p in r["ports"]}
    assert {("UDP", 53), ("TCP", 443), ("TCP", 6443), ("TCP", 8000)} <= egress_ports


def test_activator_takes_traffic_and_exposes_admin_to_prometheus_only(
    deploy_objects: list[dict[str, Any]],
) -> None:
    deployments = _by(deploy_objects, "Deployment")
    policy = _by(deploy_objects, "NetworkPolicy")["tidal-activator"]["spec"]
    ports = _ports(deployments["tidal-activator"])
    by_port = {p["port"]: r for r in policy["ingress"] for p in r["ports"]}
    assert set(by_port) == {ports["http"], ports["admin"]}
    assert "from" not in by_port[ports["http"]]  # clients: anywhere
    admin_from = by_port[ports["admin"]]["from"]
    assert [p["podSelector"]["matchLabels"] for p in admin_from] == [
        {"app.kubernetes.io/name": "prometheus"}
    ]


def test_each_workload_has_a_disruption_budget_and_a_spread(
    deploy_objects: list[dict[str, Any]],
) -> None:
    budgets = _by(deploy_objects, "PodDisruptionBudget").values()
    for workload in workloads(deploy_objects):
        labels = _pod_labels(workload)
        (budget,) = [b for b in budgets if _selects(b["spec"]["selector"], labels)]
        assert budget["spec"]["maxUnavailable"] < workload["spec"]["replicas"]
        spread = workload["spec"]["template"]["spec"]["topologySpreadConstraints"]
        keys = {c["topologyKey"] for c in spread if _selects(c["labelSelector"], labels)}
        assert {"kubernetes.io/hostname", "topology.kubernetes.io/zone"} <= keys


# --- rules and dashboard ----------------------------------------------------------


def test_promtool_checks_the_rules(tool_path: Callable[[str], str], tmp_path: Path) -> None:
    rules = tmp_path / "tidal.rules.yml"
    rules.write_text(yaml.safe_dump(rule_groups()))
    done = subprocess.run(
        [tool_path("promtool"), "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rule_groups()['groups'])} rules found" in (
        done.stdout
    )


def test_the_alerts_named_in_the_docs_exist() -> None:
    assert {
        "TidalActivatorBufferNearFull",
        "TidalRequestsWaitingTooLong",
        "TidalScalerNoLeader",
        "TidalScalerWritesFailing",
        "TidalSpotFallbackSustained",
    } <= set(alerts())
    operating = (DEPLOY.parent / "docs" / "operating.md").read_text()
    for name in alerts():
        assert name in operating, f"docs/operating.md does not explain {name}"


# promtool's unit tests: synthetic series in, alerts out, in simulated time.
def _fired(name: str, **labels: str) -> dict[str, Any]:
    """An expected alert: its labels, and its annotations with ``$labels`` filled in."""
    rule = alerts()[name]
    annotations = {}
    for key, template in rule["annotations"].items():
        for label, value in labels.items():
            template = template.replace("{{ $labels." + label + " }}", value)
        annotations[key] = template
    return {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": annotations}


def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{body}}}", "values": values}


_PROMTOOL_TESTS = {
    "rule_files": ["tidal.rules.yml"],
    "evaluation_interval": "15s",
    "tests": [
        {
            # One activator holds 9 of 10 for a minute and more: it fires for
            # that activator only; the other one, at 5 of 10, does not.
            "interval": "15s",
            "input_series": [
                _series("tidal_activator_requests_buffered", "0 9x10", pod="a-1", target="ns/m"),
                _series("tidal_activator_buffer_capacity", "10x10", pod="a-1", target="ns/m"),
                _series("tidal_activator_requests_buffered", "0 5x10", pod="a-2", target="ns/m"),
                _series("tidal_activator_buffer_capacity", "10x10", pod="a-2", target="ns/m"),
            ],
            "alert_rule_test": [
                {"eval_time": "30s", "alertname": "TidalActivatorBufferNearFull", "exp_alerts": []},
                {
                    "eval_time": "2m",
                    "alertname": "TidalActivatorBufferNearFull",
                    "exp_alerts": [
                        _fired("TidalActivatorBufferNearFull", pod="a-1", target="ns/m")
                    ],
                },
            ],
        },
        {
            # The leader steps down at 45 s and nobody takes over; writes for
            # ns/m fail from 1 min on.
            "interval": "15s",
            "input_series": [
                _series("tidal_scaler_leader", "1 1 1 0x20", pod="s-1"),
                _series("tidal_scaler_leader", "0x23", pod="s-2"),
                _series(
                    "tidal_scaler_write_failures_total", "0x4 1+1x30", pod="s-1", target="ns/m"
                ),
            ],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "TidalScalerNoLeader", "exp_alerts": []},
                {
                    "eval_time": "3m",
                    "alertname": "TidalScalerNoLeader",
                    "exp_alerts": [_fired("TidalScalerNoLeader")],
                },
                {"eval_time": "3m", "alertname": "TidalScalerWritesFailing", "exp_alerts": []},
                {
                    "eval_time": "7m",
                    "alertname": "TidalScalerWritesFailing",
                    "exp_alerts": [_fired("TidalScalerWritesFailing", target="ns/m")],
                },
            ],
        },
    ],
}


def test_promtool_drives_alerts_to_firing(tool_path: Callable[[str], str], tmp_path: Path) -> None:
    (tmp_path / "tidal.rules.yml").write_text(yaml.safe_dump(rule_groups()))
    tests = tmp_path / "tidal.tests.yml"
    tests.write_text(yaml.safe_dump(_PROMTOOL_TESTS, sort_keys=False))
    done = subprocess.run(
        [tool_path("promtool"), "test", "rules", str(tests)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _registered() -> set[str]:
    names = set()
    scaler, activator = CollectorRegistry(), CollectorRegistry()
    ScalerMetrics(scaler)
    ActivatorMetrics(activator, targets=dict)
    for registry in (scaler, activator):
        for family in registry.collect():
            names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def test_rules_and_dashboard_read_registered_metrics_only() -> None:
    referenced = referenced_metrics()
    assert len(referenced) >= 12
    assert referenced - _registered() == set()


def test_dashboard_shows_what_an_operator_needs() -> None:
    board = dashboard()
    titles = " ".join(p["title"].lower() for p in board["panels"])
    for topic in ("desired", "held", "in flight", "cold-start", "status", "gpu", "cost"):
        assert topic in titles, topic
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "target"}


# --- the image ------------------------------------------------------------------------


def test_dockerfile_builds_the_runtime_only() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    final = text.rsplit("\nFROM ", 1)[1]
    assert "USER 65532" in final
    assert "loadtests" not in text, "the image must not carry the sandbox or the load tests"
    assert "[" not in "".join(line for line in text.splitlines() if "pip" in line), "no extras"
    for compiler in ("gcc", "build-essential", "g++", "clang"):
        assert compiler not in final


def test_dockerfile_copies_every_package_the_image_installs() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    included = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in included} - {"loadtests"}
    text = (DEPLOY / "Dockerfile").read_text()
    assert packages == {"groundwork", "scaler", "activator", "simulator"}
    for package in packages:
        assert f"COPY {package} {package}\n" in text, package


# --- the example a user copies ------------------------------------------------------


@pytest.mark.parametrize(
    "example", ["vllm-llama.yaml", "vllm-llama-spot.yaml", "inferencepool-llama.yaml"]
)
def test_example_validates_and_leaves_replicas_to_tidal(example: str) -> None:
    objects = [o for o in yaml.safe_load_all((DEPLOY / "examples" / example).read_text()) if o]
    for obj in objects:
        if obj["kind"] == "InferencePool":
            # Against the CRD's own schema and rules, as the sandbox's API server holds them.
            group, version = obj["apiVersion"].split("/")
            validate_object(
                copy.deepcopy(obj),
                group=group,
                version=version,
                kind=obj["kind"],
                namespaced=True,
                field_validation="Strict",
            )
        else:
            kubernetes_validate.validate(obj, SCHEMA_VERSIONS[0], strict=True)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    # A replicas field in the manifest is written back over Tidal's number on
    # every apply: docs/operating.md tells users to leave it out, so does this.
    assert "replicas" not in deployment["spec"]
    opted_in = [o for o in objects if o["kind"] in ("Deployment", "InferencePool")]
    assert any(
        o["metadata"].get("labels", {}).get("autoscaling.tidal.dev/enabled") == "true"
        for o in opted_in
    )
