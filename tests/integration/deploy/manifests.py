"""Helpers for the deploy/ tests: render the kustomizations, read the rules and the dashboard."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
MONITORING = DEPLOY / "monitoring"

_METRIC = re.compile(r"\b(tidal_(?:scaler|activator)_[a-z0-9_]+)")
_SUFFIXES = ("_bucket", "_sum", "_count")


def render(tool_path: Callable[[str], str], directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize DIRECTORY`` as a list of objects (fails the test if it cannot)."""
    done = subprocess.run(
        [tool_path("kubectl"), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl kustomize {directory} failed:\n{done.stderr}"
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


def workloads(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (o for o in objects if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet"))


def rule_groups() -> dict[str, Any]:
    """The PrometheusRule's spec: a plain Prometheus rule file as it stands."""
    (rule,) = [o for o in yaml.safe_load_all((MONITORING / "rules.yaml").read_text()) if o]
    spec: dict[str, Any] = rule["spec"]
    return spec


def alerts() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rule_groups()["groups"] for r in g["rules"] if "alert" in r}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return loaded


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def metric_names(exprs: list[str]) -> set[str]:
    """The Tidal metric families the expressions read (histogram suffixes dropped)."""
    names = set()
    for expr in exprs:
        for name in _METRIC.findall(expr):
            for suffix in _SUFFIXES:
                if name.endswith(suffix) and "seconds" in name:
                    name = name.removesuffix(suffix)
            names.add(name)
    return names


def referenced_metrics() -> set[str]:
    """Every Tidal metric the rules or the dashboard read, as exposed (counters with _total)."""
    rule_exprs = [r["expr"] for g in rule_groups()["groups"] for r in g["rules"]]
    return metric_names(rule_exprs + dashboard_exprs())
