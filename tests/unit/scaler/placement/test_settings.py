"""The scaler's ``placement`` settings group (:mod:`scaler.placement.settings`).

Covers: the default (Karpenter, default prices, 60 s hold); a preset with
extra notice taints from the environment; a custom provider from a YAML
file; prices from the file; bad values (custom without its label, custom
keys with a preset, a price table without '*', an unknown capacity type,
a negative hold) rejected with a message naming the key; ``--help`` lists
the group; the scaler's flat prices stand in when no table is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.policy.placement.availability import CapacityType
from scaler.policy.placement.cost import DEFAULT_PRICES
from scaler.settings import SettingsError, describe_settings, load_settings


def test_defaults() -> None:
    settings = load_settings()
    assert settings.placement.preset().name == "karpenter"
    assert settings.placement.price_table() is DEFAULT_PRICES
    assert settings.placement.release_hold_s == 60.0


def test_preset_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDAL_SCALER_PLACEMENT__PROVIDER", "gke")
    monkeypatch.setenv("TIDAL_SCALER_PLACEMENT__NOTICE_TAINTS", '["example.com/draining"]')
    p = load_settings().placement.preset()
    assert p.capacity_label == "cloud.google.com/gke-spot"
    assert p.notice_taints == (
        "cloud.google.com/impending-node-termination",
        "example.com/draining",
    )


def test_custom_provider_and_prices_from_file(tmp_path: Path) -> None:
    config = tmp_path / "scaler.yaml"
    config.write_text(
        "placement:\n"
        "  provider: custom\n"
        "  capacity_label: example.com/lifecycle\n"
        "  spot_value: spot\n"
        "  spot_tolerations: [{key: example.com/lifecycle, value: spot}]\n"
        "  notice_taints: [example.com/going]\n"
        "  prices:\n"
        "    on-demand: {'*': 3.0}\n"
        "    spot: {'*': 1.0, NVIDIA-L4: 0.2}\n"
    )
    placement = load_settings(config_file=config).placement
    p = placement.preset()
    assert p.spot_tolerations[0].as_dict() == {
        "key": "example.com/lifecycle",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    }
    assert p.capacity_of({}) is CapacityType.ON_DEMAND
    assert placement.price_table().price(CapacityType.SPOT, "NVIDIA-L4") == 0.2


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        pytest.param({"placement.provider": "custom"}, "needs capacity_label", id="custom bare"),
        pytest.param(
            {"placement.spot_value": "x"}, "for provider custom only", id="custom key on preset"
        ),
        pytest.param({"placement.provider": "azure"}, "placement.provider", id="unknown provider"),
        pytest.param(
            {"placement.prices": {"on-demand": {"a": 1.0}, "spot": {"*": 1.0}}},
            "need a '*' entry",
            id="no fallback price",
        ),
        pytest.param(
            {"placement.prices": {"reserved": {"*": 1.0}}},
            "unknown capacity type",
            id="unknown capacity",
        ),
        pytest.param({"placement.release_hold_s": -1}, "release_hold_s", id="negative hold"),
    ],
)
def test_bad_values(flags: dict[str, object], fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment.replace("*", r"\*")):
        load_settings(flags=flags)


def test_help_lists_the_group() -> None:
    text = describe_settings()
    for name in ("placement.provider", "placement.notice_taints", "placement.prices"):
        assert name in text
    assert "TIDAL_SCALER_PLACEMENT__RELEASE_HOLD_S" in text


def test_flat_prices_stand_in_for_the_table() -> None:
    placement = load_settings().placement
    table = placement.price_table(flat={"on-demand": 3.0, "spot": 0.0})
    assert table.price(CapacityType.ON_DEMAND, "NVIDIA-L4") == 3.0  # any model
    assert table.price(CapacityType.SPOT, "NVIDIA-L4") == DEFAULT_PRICES.price(
        CapacityType.SPOT, "NVIDIA-L4"
    )  # 0 is unset: the default stays
    assert placement.price_table(flat={"on-demand": 0.0, "spot": 0.0}) is DEFAULT_PRICES
