"""One help style across every ``tidal`` subcommand, checked by walking each parser.

The README promises that every ``--help`` names defaults, units and
environment variables. Covers, for every flag of every subcommand in
``scaler.cli.SUBCOMMANDS``: it has help text; a flag that takes a value has
a metavar that says what it takes (``DURATION``, ``URL``; not a dest-like
``SLO_TTFT`` or a bare ``VALUE``) or a list of choices; a default other than "off" is
named in the help exactly once, and an environment variable at most once;
``--dir`` has the same default wherever it appears and is never required.
"""

from __future__ import annotations

import argparse
import re

import pytest

from scaler.cli import SUBCOMMANDS, Subcommand

# Flags whose default is "not set": nothing for the help to name.
_UNSET = (None, False, argparse.SUPPRESS)


def _parser_of(sub: Subcommand) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidal " + " ".join(sub.path))
    sub.load().configure(parser)
    return parser


def _flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    # argparse offers no public list of a parser's actions; _actions is the one it keeps.
    return [
        a
        for a in parser._actions
        if a.option_strings and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
    ]


def _problems(action: argparse.Action) -> list[str]:
    name = max(action.option_strings, key=len)
    text = action.help or ""
    problems = []
    if not text or text == argparse.SUPPRESS:
        return [f"{name}: no help"]
    takes_value = action.nargs != 0
    if takes_value and action.choices is None:
        # A dest-like SLO_TTFT or a bare VALUE says nothing of what to write.
        metavar = str(action.metavar or action.dest.upper())
        if "_" in metavar or metavar == "VALUE":
            problems.append(f"{name}: metavar {metavar!r} says not what it takes")
    shown = text.replace("%(default)s", str(action.default)).lower()
    said = len(re.findall(r"(?<![a-z_])default(?![a-z_])", shown))
    if action.default not in _UNSET and takes_value and said != 1:
        problems.append(f"{name}: default {action.default!r} named {said} times in {text!r}")
    if said > 1:
        problems.append(f"{name}: 'default' {said} times in {text!r}")
    envs = re.findall(r"\$?\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", text)
    if len(envs) != len(set(envs)):
        problems.append(f"{name}: an environment variable named twice in {text!r}")
    return problems


@pytest.mark.parametrize("sub", SUBCOMMANDS, ids=lambda s: " ".join(s.path))
def test_every_flag_says_what_it_takes_and_its_default_once(sub: Subcommand) -> None:
    problems = [p for a in _flags(_parser_of(sub)) for p in _problems(a)]
    assert problems == []


def test_dir_has_one_default_everywhere() -> None:
    dirs = {
        " ".join(sub.path): a
        for sub in SUBCOMMANDS
        for a in _flags(_parser_of(sub))
        if "--dir" in a.option_strings
    }
    assert len(dirs) >= 4, sorted(dirs)
    assert not any(a.required for a in dirs.values()), sorted(dirs)
    assert len({str(a.default) for a in dirs.values()}) == 1, {
        k: a.default for k, a in dirs.items()
    }
