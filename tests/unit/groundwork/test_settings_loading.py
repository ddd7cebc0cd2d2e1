"""The one settings loader both services use, and the errors it prints.

Covers: a bad value is named where it was given (the flag, the environment
variable, the file's key) with the value and what the field allows (type and
bounds); an unknown key in the file is named; a secret's value is never
echoed; ``tidal activator --port abc`` and ``tidal scaler --port abc`` each
print one line naming the flag, the value and the allowed range, and exit 2;
a secret or a URL with credentials given as a flag is warned about, naming
the variable (and the file setting) to use instead. (Precedence, flag over
environment over file, is tested per service.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from activator.settings import ActivatorSettings
from groundwork.settings_loading import SettingsError, load_settings, visible_secret_warnings
from scaler.cli import main
from scaler.settings import FLAGS, ScalerSettings


def test_a_bad_flag_names_the_flag_the_value_and_what_is_allowed() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(ActivatorSettings, flags={"port": "abc", "timeouts.connect_s": "0"})
    assert str(caught.value).splitlines() == [
        "--port 'abc': not a valid integer; allowed: an integer from 0 to 65535",
        "--timeouts-connect-s '0': should be greater than 0; allowed: a number above 0",
    ]


def test_a_flag_with_another_name_is_named_as_typed() -> None:
    with pytest.raises(SettingsError, match=r"^--tick-interval-s 'soon': not a valid number"):
        load_settings(ScalerSettings, flags={"tick_interval_s": "soon"}, flag_names=FLAGS)


def test_a_bad_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDAL_SCALER_KUBE__WATCH_TIMEOUT_S", "5")
    with pytest.raises(SettingsError) as caught:
        load_settings(ScalerSettings)
    assert str(caught.value) == (
        "TIDAL_SCALER_KUBE__WATCH_TIMEOUT_S '5': should be greater than or equal to 10; "
        "allowed: an integer 10 or more"
    )


def test_a_bad_or_unknown_file_key_is_named(tmp_path: Path) -> None:
    config = tmp_path / "activator.yaml"
    config.write_text("limits: {max_headers: 5}\ntimeout: {connect_s: 2}\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(ActivatorSettings, config_file=config)
    assert sorted(str(caught.value).splitlines()) == [
        f"limits.max_headers in {config} 5: should be greater than or equal to 8; "
        "allowed: an integer from 8 to 10000",
        f"timeout in {config}: unknown setting",
    ]


def test_a_secret_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(ActivatorSettings, flags={"scaler_token": ["hunter2"]})
    assert "hunter2" not in str(caught.value)
    assert str(caught.value).startswith("--scaler-token (secret):")


@pytest.mark.parametrize("service", ["activator", "scaler"])
def test_cli_prints_one_line_for_a_bad_port(
    service: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([service, "--port", "abc"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tidal {service}: --port 'abc': not a valid integer; allowed: an integer from 0 to 65535"
    ]


def test_secrets_given_as_flags_are_warned_about() -> None:
    flags = {"scaler_token": "t0k", "scaler_url": "http://user:pw@scaler:8090", "port": "1"}
    token, url = visible_secret_warnings(ActivatorSettings, flags)
    assert token == (
        "--scaler-token is visible to every user of this machine (ps, /proc); "
        "set TIDAL_ACTIVATOR_SCALER_TOKEN or --scaler-token-file FILE instead"
    )
    assert url.startswith("--scaler-url holds credentials")
    assert "TIDAL_ACTIVATOR_SCALER_URL" in url
    assert visible_secret_warnings(ActivatorSettings, {"scaler_url": "http://scaler"}) == []
