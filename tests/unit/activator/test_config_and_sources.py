"""Parsing: durations, the routes file, settings, and Kubernetes objects.

Covers: Go-style durations and their errors; DESIGN §3's routes-file example
parses exactly; each routes-file mistake gets an error naming entry and key;
settings precedence (flags over env over file) and cross-field errors; the
scaler token from the environment or a file, a flag still accepted with a
warning; the error -> status table (one mapping, tested as a table); Deployment
annotations and EndpointSlices translated into targets (ready, terminating,
port by name or number, invalid annotations reported and defaulted); the
metrics merge for ``--workers`` sums samples.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from activator.cli import configure, settings_from_args
from activator.holding.gate import BufferFull, ColdStartTimeout, GateClosed
from activator.kube.translate import build_targets, endpoints_from_slices, target_from_deployment
from activator.metrics import merge_expositions
from activator.proxy import error_response
from activator.routing.routes_file import parse_routes
from activator.settings import ActivatorSettings
from activator.statuses import (
    AllRefused,
    BadBody,
    BodyStalled,
    BodyTooLarge,
    ConnectRefused,
    Draining,
    NoTarget,
    RefusedRequest,
    UpstreamFailed,
)
from activator.targets import Endpoint, parse_duration_s
from groundwork.settings_loading import flags_from_args, load_settings, visible_secret_warnings

DESIGN_EXAMPLE = """
targets:
  - name: default/llama          # namespace/name
    models: [llama-3-8b]         # optional, as are hosts and path_prefix
    hosts: [llama.example.com]
    path_prefix: /llama
    endpoints: ["127.0.0.1:8001", "127.0.0.1:8002"]
    container_concurrency: 0
    cold_start_timeout: 10m
    max_buffered: 1000
"""


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), (12, 12.0), ("1.5s", 1.5)],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration_s(text, key="k") == seconds


@pytest.mark.parametrize("bad", ["", "10", "5 m", "1d", "m5", "-1s"])
def test_bad_durations_say_what_is_allowed(bad: str) -> None:
    with pytest.raises(ValueError, match=r"k: .*Go-style"):
        parse_duration_s(bad, key="k")


def test_design_example_parses() -> None:
    specs = parse_routes(DESIGN_EXAMPLE)
    llama = specs["default/llama"]
    assert llama.models == ("llama-3-8b",)
    assert llama.hosts == ("llama.example.com",)
    assert llama.path_prefix == "/llama"
    assert llama.cold_start_timeout_s == 600
    assert llama.max_buffered == 1000
    assert [e.key for e in llama.endpoints] == ["127.0.0.1:8001", "127.0.0.1:8002"]
    assert not any(e.ready for e in llama.endpoints)  # ready only once probed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("targets: 3", "'targets' must be a list"),
        ("other: []", "one key, 'targets'"),
        ("targets: [{name: llama}]", r"targets\[0\].name: 'llama' is not a target name"),
        ("targets: [{name: a/b, endpoints: [nope]}]", r"targets\[0\] \(a/b\).endpoints: 'nope'"),
        ("targets: [{name: a/b, max_buffered: -1}]", "max_buffered must be 0..100000"),
        ("targets: [{name: a/b, cold_start_timeout: 2h}]", "cold_start_timeout must be 1s..1h"),
        ("targets: [{name: a/b, colour: red}]", r"unknown key\(s\) \['colour'\]"),
        ("targets: [{name: a/b, path_prefix: x}]", "path_prefix must start with '/'"),
        ("targets: [{name: a/b, hosts: [h]}, {name: a/c, hosts: [h]}]", "host 'h' is claimed"),
        ("targets: [{name: a/b}, {name: a/b}]", "listed twice"),
        ("targets: [{name: a/b, resend_unanswered: maybe}]", "resend_unanswered: expected true or"),
        ("targets: [{name: a/b, resend_unanswered: 1}]", "resend_unanswered: expected true or"),
    ],
)
def test_routes_file_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_routes(text)


def test_settings_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "a.yaml"
    config.write_text("port: 1000\nadmin_port: 1001\ntimeouts: {connect_s: 9, drain_s: 7}\n")
    monkeypatch.setenv("TIDAL_ACTIVATOR_PORT", "2000")
    monkeypatch.setenv("TIDAL_ACTIVATOR_TIMEOUTS__CONNECT_S", "3")
    s = load_settings(ActivatorSettings, flags={"timeouts.drain_s": 1}, config_file=config)
    assert s.port == 2000
    assert s.admin_port == 1001
    assert s.timeouts.connect_s == 3
    assert s.timeouts.drain_s == 1
    with pytest.raises(ValueError, match="port and admin_port must differ"):
        load_settings(ActivatorSettings, flags={"port": 5, "admin_port": 5})
    with pytest.raises(ValueError, match="not a readable file"):
        load_settings(ActivatorSettings, config_file=tmp_path / "missing.yaml")


def test_scaler_token_from_env_or_file_and_a_flag_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDAL_ACTIVATOR_SCALER_TOKEN", "from-env")
    token = load_settings(ActivatorSettings).scaler_token
    assert token is not None and token.get_secret_value() == "from-env"
    monkeypatch.delenv("TIDAL_ACTIVATOR_SCALER_TOKEN")
    path = tmp_path / "token"
    path.write_text("from-file\n")
    token = load_settings(ActivatorSettings, flags={"scaler_token_file": str(path)}).scaler_token
    assert token is not None and token.get_secret_value() == "from-file"
    with pytest.raises(ValueError, match="not both"):
        load_settings(
            ActivatorSettings, flags={"scaler_token_file": str(path), "scaler_token": "x"}
        )
    path.write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        load_settings(ActivatorSettings, flags={"scaler_token_file": str(path)})
    with pytest.raises(ValueError, match="cannot read"):
        load_settings(ActivatorSettings, flags={"scaler_token_file": str(tmp_path / "absent")})
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(["--scaler-token", "visible"])
    assert settings_from_args(args).scaler_token is not None
    [warning] = visible_secret_warnings(ActivatorSettings, flags_from_args(args))
    assert "--scaler-token is visible" in warning
    assert "TIDAL_ACTIVATOR_SCALER_TOKEN" in warning
    assert "--scaler-token-file" in warning
    given = flags_from_args(parser.parse_args(["--scaler-token-file", str(path)]))
    assert visible_secret_warnings(ActivatorSettings, given) == []


@pytest.mark.parametrize(
    ("exc", "status", "code", "retry_after"),
    [
        (NoTarget(), 404, "no_target", False),
        (GateClosed("t"), 404, "no_target", False),
        (BadBody(), 400, "bad_body", False),
        (BodyStalled(), 408, "body_timeout", False),
        (BodyTooLarge(), 413, "body_too_large", False),
        (BufferFull("t"), 503, "buffer_full", True),
        (Draining(), 503, "draining", True),
        (ColdStartTimeout("t"), 504, "cold_start_timeout", False),
        (AllRefused(), 502, "all_refused", False),
        (UpstreamFailed(), 502, "upstream_failed", False),
        (RefusedRequest(), 400, "refused_request", False),
        (ConnectRefused(), 405, "refused_request", False),
    ],
)
def test_error_status_table(exc: Exception, status: int, code: str, retry_after: bool) -> None:
    # error_response writes the answer as bytes (the data path is byte-level).
    answer = error_response(exc, request_id="r1", retry_after_s=3)
    head, body_bytes = answer.split(b"\r\n\r\n", 1)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    assert int(status_line.split(" ")[1]) == status
    assert headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(body_bytes)
    body = json.loads(body_bytes)
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert body["error"]["type"]
    assert ("Retry-After" in headers) is retry_after
    assert headers["X-Request-Id"] == "r1"


def deployment(name: str = "llama", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"autoscaling.tidal.dev/enabled": "true"},
            "annotations": {
                f"routing.tidal.dev/{k.replace('_', '-')}": v for k, v in annotations.items()
            },
        }
    }


SERVICE = {
    "metadata": {"name": "llama-svc", "namespace": "ml"},
    "spec": {"ports": [{"name": "metrics", "port": 9000}, {"name": "http", "port": 80}]},
}


def endpoint_slice(*endpoints: dict[str, Any], service: str = "llama-svc") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{service}-abc",
            "namespace": "ml",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "metrics", "port": 9000}, {"name": "http", "port": 8000}],
        "endpoints": list(endpoints),
    }


def ep(ip: str, pod: str, **conditions: bool) -> dict[str, Any]:
    return {
        "addresses": [ip],
        "conditions": conditions,
        "targetRef": {"kind": "Pod", "name": pod, "namespace": "ml"},
    }


def test_deployment_annotations_translate() -> None:
    routing = target_from_deployment(
        deployment(
            hosts="a.example.com, *.b.example.com",
            models="m1,m2",
            path_prefix="/llama",
            cold_start_timeout="2m",
            max_buffered="50",
            container_concurrency="4",
            service="llama-svc",
            port="http",
            resend_unanswered="False",
        )
    )
    assert routing.problems == ()
    assert routing.spec.resend_unanswered is False
    s = routing.spec
    assert s.name == "ml/llama"
    assert s.hosts == ("a.example.com", "*.b.example.com")
    assert s.models == ("m1", "m2")
    assert s.cold_start_timeout_s == 120
    assert (s.max_buffered, s.container_concurrency) == (50, 4)
    assert (routing.service, routing.port) == ("llama-svc", "http")
    bad = target_from_deployment(
        deployment(max_buffered="lots", cold_start_timeout="3h", resend_unanswered="no")
    )
    assert bad.spec.max_buffered == 1000
    assert bad.spec.cold_start_timeout_s == 600
    assert bad.spec.resend_unanswered is True
    assert len(bad.problems) == 3
    assert "max-buffered='lots'" in bad.problems[1]
    assert "resend-unanswered='no' is invalid; allowed: true or false" in bad.problems[2]
    assert bad.service == "llama"


def test_endpoint_slices_translate() -> None:
    sl = endpoint_slice(
        ep("10.0.0.1", "p1", ready=True),
        ep("10.0.0.2", "p2", ready=False),
        ep("10.0.0.3", "p3", ready=False, terminating=True),
        ep("10.0.0.4", "p4"),  # no condition: ready
        ep("10.0.0.5", "p5", ready=False, serving=True),  # terminating, not said so
    )
    by_name = endpoints_from_slices([sl], port="http")
    # Terminating endpoints are kept as draining (their in-flight requests
    # stay counted), never ready; before issue 13 they were dropped.
    assert by_name == (
        Endpoint("10.0.0.1", 8000, name="p1", ready=True),
        Endpoint("10.0.0.2", 8000, name="p2", ready=False),
        Endpoint("10.0.0.3", 8000, name="p3", ready=False, draining=True),
        Endpoint("10.0.0.4", 8000, name="p4", ready=True),
        Endpoint("10.0.0.5", 8000, name="p5", ready=False, draining=True),
    )
    routable = tuple(e for e in by_name if not e.draining)
    assert [e.name for e in routable] == ["p1", "p2", "p4"]
    # A Service port number maps to its name, then to the slice's target port.
    assert endpoints_from_slices([sl], port=80, service=SERVICE) == by_name
    # Default: the Service's first port.
    assert {e.port for e in endpoints_from_slices([sl], port=None, service=SERVICE)} == {9000}
    assert endpoints_from_slices([sl], port="grpc") == ()


def test_build_targets_joins_kinds() -> None:
    deps = [
        deployment(service="llama-svc", port="http"),
        {**deployment("off"), "metadata": {**deployment("off")["metadata"], "labels": {}}},
    ]
    sl = endpoint_slice(ep("10.0.0.1", "p1", ready=True))
    targets, problems = build_targets(deps, {"ml/llama-svc": SERVICE}, [sl])
    assert list(targets) == ["ml/llama"]
    assert problems == []
    assert targets["ml/llama"].endpoints == (Endpoint("10.0.0.1", 8000, name="p1", ready=True),)


def test_metrics_merge_sums_workers() -> None:
    one = (
        "# HELP x_total things\n# TYPE x_total counter\n"
        'x_total{code="2xx"} 3.0\nx_created{code="2xx"} 1.7e9\n'
        "# HELP g held\n# TYPE g gauge\ng 2.0\n"
    )
    two = (
        '# HELP x_total things\n# TYPE x_total counter\nx_total{code="2xx"} 4.0\n'
        "# TYPE g gauge\ng 1.0\n"
    )
    merged = merge_expositions([one, two])
    assert 'x_total{code="2xx"} 7.0' in merged
    assert "g 3.0" in merged
    assert "created" not in merged
