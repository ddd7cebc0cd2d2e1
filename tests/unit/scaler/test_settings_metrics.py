"""Settings precedence and validation; metric names and label hygiene.

Covers:
- flag > environment (``TIDAL_SCALER_``, ``__`` for groups) > YAML file > default;
- cross-field errors name the keys and values (leader timings, report periods);
- unknown keys in the file are refused; ``--help`` names every setting's
  environment variable once;
- the token from the environment or a file (``--token-file``), never both
  with ``--token``; an unreadable or empty file is refused; a token or
  credentials in a command-line flag get a warning (visible in ``ps``);
- metrics: ``tidal_scaler_*`` names, closed label sets refuse other values,
  forgetting a target removes its series.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from groundwork.settings_loading import env_name, setting_fields
from scaler.metrics import Metrics
from scaler.policy.api import SignalKind, SignalReading
from scaler.service import configure
from scaler.settings import (
    ScalerSettings,
    SettingsError,
    describe_settings,
    load_settings,
    visible_secret_warnings,
)


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "scaler.yaml"
    cfg.write_text(
        "port: 7000\ntick_interval_s: 3\n"
        "prometheus:\n  url: http://file\n  pod_label: exported_pod\n"
    )
    monkeypatch.setenv("TIDAL_SCALER_PORT", "7100")
    monkeypatch.setenv("TIDAL_SCALER_PROMETHEUS__NAMESPACE_LABEL", "exported_namespace")
    s = load_settings(flags={"prometheus.url": "http://flag", "identity": None}, config_file=cfg)
    assert s.port == 7100  # env beats file
    assert s.tick_interval_s == 3.0  # file beats default
    assert s.prometheus.url == "http://flag"  # flag beats file
    assert (s.prometheus.pod_label, s.prometheus.namespace_label) == (
        "exported_pod",
        "exported_namespace",
    )
    assert s.identity is None


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        pytest.param({"leader.renew_deadline_s": 20.0}, "renew_deadline_s", id="leader-nesting"),
        pytest.param(
            {"reports.fresh_within_periods": 5.0}, "fresh_within_periods", id="report-periods"
        ),
        pytest.param({"port": 70000}, "port", id="port-range"),
        pytest.param({"log_level": "loud"}, "log_level", id="log-level"),
    ],
)
def test_bad_settings(flags: dict[str, object], fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        load_settings(flags=flags)


def test_unknown_file_key(tmp_path: Path) -> None:
    cfg = tmp_path / "scaler.yaml"
    cfg.write_text("tick_interval: 2\n")
    with pytest.raises(SettingsError, match="tick_interval"):
        load_settings(config_file=cfg)


def test_help_lists_every_setting_once() -> None:
    parser = argparse.ArgumentParser()
    configure(parser)
    text = parser.format_help()
    for dotted, _ in setting_fields(ScalerSettings):
        env = env_name(ScalerSettings, dotted)
        assert re.findall(rf"\b{env}\b", text) == [env], env
    assert "(default: 8090; env TIDAL_SCALER_PORT)" in " ".join(text.split())
    assert "TIDAL_SCALER_LEADER__LEASE_DURATION_S" in describe_settings()  # no flag: listed


def test_metrics_names_and_labels() -> None:
    m = Metrics(CollectorRegistry())
    m.observe_decision(
        "ns/a",
        desired=3,
        ready=2,
        panic=True,
        readings={SignalKind.CONCURRENCY: SignalReading(stable=10.0, panic=30.0, fresh=True)},
        observed={"activator_concurrency": 4.0, "not_a_known_signal": 1.0},
    )
    m.scaled("ns/a", direction="up")
    m.set_leader(True)
    get = m.registry.get_sample_value
    assert (
        get("tidal_scaler_desired_replicas", {"target": "ns/a", "capacity_type": "on-demand"}) == 3
    )
    assert get("tidal_scaler_panic_mode", {"target": "ns/a"}) == 1
    assert (
        get("tidal_scaler_signal_panic_average", {"target": "ns/a", "signal": "concurrency"}) == 30
    )
    assert (
        get("tidal_scaler_observed_signal", {"target": "ns/a", "signal": "activator_concurrency"})
        == 4
    )
    assert (
        get("tidal_scaler_observed_signal", {"target": "ns/a", "signal": "not_a_known_signal"})
        is None
    )
    assert get("tidal_scaler_scaling_events_total", {"target": "ns/a", "direction": "up"}) == 1
    assert get("tidal_scaler_leader") == 1
    with pytest.raises(ValueError, match="direction"):
        m.scaled("ns/a", direction="sideways")
    m.forget_target("ns/a")
    assert (
        get("tidal_scaler_desired_replicas", {"target": "ns/a", "capacity_type": "on-demand"})
        is None
    )
    assert get("tidal_scaler_scaling_events_total", {"target": "ns/a", "direction": "up"}) is None
    names = {metric.name for metric in m.registry.collect()}
    assert all(n.startswith("tidal_scaler_") for n in names)


def test_token_from_file_or_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "token"
    secret.write_text("s3cret-from-file\n")
    s = load_settings(flags={"token_file": str(secret)})
    assert s.token is not None
    assert s.token.get_secret_value() == "s3cret-from-file"
    assert "s3cret" not in repr(s)
    monkeypatch.setenv("TIDAL_SCALER_TOKEN_FILE", str(secret))
    assert load_settings().token is not None
    monkeypatch.delenv("TIDAL_SCALER_TOKEN_FILE")
    monkeypatch.setenv("TIDAL_SCALER_TOKEN", "s3cret-from-env")
    env = load_settings().token
    assert env is not None
    assert env.get_secret_value() == "s3cret-from-env"
    with pytest.raises(SettingsError, match="token and token_file: set one of them"):
        load_settings(flags={"token_file": str(secret)})


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        pytest.param(None, "cannot read", id="missing"),
        pytest.param("\n", "is empty", id="empty"),
        pytest.param("two words\n", "holds no usable token", id="space-inside"),
    ],
)
def test_bad_token_file_is_refused(tmp_path: Path, content: str | None, fragment: str) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SettingsError, match=fragment) as caught:
        load_settings(flags={"token_file": str(path)})
    assert str(path) in str(caught.value)
    assert "allowed" in str(caught.value)


def test_secrets_on_the_command_line_are_warned_about() -> None:
    [warning] = visible_secret_warnings({"token": "x", "prometheus.url": "http://prom:9090"})
    assert "--token" in warning
    assert "ps" in warning
    assert "TIDAL_SCALER_TOKEN" in warning
    [creds] = visible_secret_warnings({"prometheus.url": "http://user:pw@prom:9090/x"})
    assert "TIDAL_SCALER_PROMETHEUS__URL" in creds
    assert visible_secret_warnings({"token": None, "token_file": "/run/secret"}) == []
