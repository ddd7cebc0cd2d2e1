"""Settings precedence and validation; metric names and label hygiene.

Covers:
- flag > environment (``TIDAL_SCALER_``, ``__`` for groups) > YAML file > default;
- cross-field errors name the keys and values (leader timings, report periods);
- unknown keys in the file are refused; ``--help`` text lists every setting;
- metrics: ``tidal_scaler_*`` names, closed label sets refuse other values,
  forgetting a target removes its series.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from scaler.metrics import Metrics
from scaler.policy.api import SignalKind, SignalReading
from scaler.settings import SettingsError, describe_settings, load_settings


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


def test_help_lists_every_setting() -> None:
    text = describe_settings()
    for name in (
        "TIDAL_SCALER_PORT",
        "TIDAL_SCALER_LEADER__LEASE_DURATION_S",
        "TIDAL_SCALER_PROMETHEUS__POD_LABEL",
    ):
        assert name in text
    assert "(default: 8090)" in text


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
    m.add_gpu_seconds("on-demand", 4.0)
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
    assert get("tidal_scaler_gpu_seconds_total", {"capacity_type": "on-demand"}) == 4
    with pytest.raises(ValueError, match="direction"):
        m.scaled("ns/a", direction="sideways")
    with pytest.raises(ValueError, match="capacity type"):
        m.add_gpu_seconds("preemptible", 1.0)
    m.forget_target("ns/a")
    assert (
        get("tidal_scaler_desired_replicas", {"target": "ns/a", "capacity_type": "on-demand"})
        is None
    )
    assert get("tidal_scaler_scaling_events_total", {"target": "ns/a", "direction": "up"}) is None
    names = {metric.name for metric in m.registry.collect()}
    assert all(n.startswith("tidal_scaler_") for n in names)
