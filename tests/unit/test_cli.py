"""The ``tidal`` composition root.

Covers: --version; subcommands appear in --help only once their module
exists; only the selected subcommand's module is imported and configured;
nested groups (``tidal sandbox …``); a bare group prints its help; an unknown
flag is reported by the subcommand, with its usage.
"""

from __future__ import annotations

import argparse
import sys
import types
from collections.abc import Iterator

import pytest

from scaler import cli


@pytest.fixture
def fake_modules() -> Iterator[dict[str, list[str]]]:
    """Two importable subcommand modules that record what happened to them."""
    calls: dict[str, list[str]] = {"configured": [], "ran": []}
    names = ("tidal_test_fake_a", "tidal_test_fake_b")
    for name in names:
        module = types.ModuleType(name)

        def configure(parser: argparse.ArgumentParser, _n: str = name) -> None:
            calls["configured"].append(_n)
            parser.add_argument("--level", type=int, default=1)

        def run(args: argparse.Namespace, _n: str = name) -> int:
            calls["ran"].append(f"{_n}:{args.level}")
            return 7

        module.configure = configure  # type: ignore[attr-defined]
        module.run = run  # type: ignore[attr-defined]
        # find_spec needs a spec; a ModuleType registered in sys.modules has none.
        module.__spec__ = types.SimpleNamespace(name=name)  # type: ignore[assignment]
        sys.modules[name] = module
    yield calls
    for name in names:
        sys.modules.pop(name, None)


SUBS = (
    cli.Subcommand(("alpha",), "tidal_test_fake_a", "the alpha command"),
    cli.Subcommand(("sandbox", "beta"), "tidal_test_fake_b", "the beta command"),
    cli.Subcommand(("missing",), "tidal_test_no_such_module", "not built yet"),
)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("tidal ")


def test_help_lists_built_subcommands_only(fake_modules: dict[str, list[str]]) -> None:
    parser, _ = cli.build_parser([], SUBS)
    text = parser.format_help()
    assert "alpha" in text
    assert "sandbox" in text
    assert "missing" not in text
    assert fake_modules["configured"] == []  # --help imports nothing


def test_only_the_selected_subcommand_is_configured(fake_modules: dict[str, list[str]]) -> None:
    parser, runners = cli.build_parser(["sandbox", "beta", "--level", "3"], SUBS)
    assert fake_modules["configured"] == ["tidal_test_fake_b"]
    args = parser.parse_args(["sandbox", "beta", "--level", "3"])
    assert runners[args._tidal_path](args) == 7
    assert fake_modules["ran"] == ["tidal_test_fake_b:3"]


def test_main_runs_subcommand_and_returns_its_status(
    fake_modules: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "SUBCOMMANDS", SUBS)
    assert cli.main(["alpha", "--level", "5"]) == 7
    assert fake_modules["ran"] == ["tidal_test_fake_a:5"]


def test_bare_group_prints_its_help(
    fake_modules: dict[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli, "SUBCOMMANDS", SUBS)
    assert cli.main(["sandbox"]) == 2
    out = capsys.readouterr().out
    assert "beta" in out
    assert "alpha" not in out


def test_an_unknown_flag_is_the_subcommands_error(
    fake_modules: dict[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli, "SUBCOMMANDS", SUBS)
    with pytest.raises(SystemExit) as exc:
        cli.main(["sandbox", "beta", "--levle", "2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tidal sandbox beta [-h] [--level LEVEL]")
    assert "tidal sandbox beta: error: unrecognized arguments: --levle 2" in err
    assert fake_modules["ran"] == []
