"""The activator's settings and command line (:mod:`activator.settings`, :mod:`activator.cli`).

Covers: settings precedence (flags over env over file) and cross-field
errors; the scaler token from the environment or a file, a flag still
accepted with a warning.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from activator.cli import configure, settings_from_args
from activator.settings import ActivatorSettings
from groundwork.settings_loading import flags_from_args, load_settings, visible_secret_warnings


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
