"""An annotation key, its problems, and the reader both services read keys with.

A :class:`Key` is one row of docs/annotations.md with the grammar of its
value (:mod:`groundwork.rules.values`). A :class:`KeyReader` reads keys one
at a time from a Deployment's annotations and collects a :class:`Problem`
for each bad value instead of stopping, so that one message can name every
bad key at once. :func:`unknown_key_problems` names a key under one of our
prefixes that no table lists, with the closest known key.

Main decision: what a bad value *does* is each service's (the scaler leaves
the Deployment's scale alone, the activator routes with the default); what
counts as bad is decided here, once, so the two cannot disagree.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from groundwork.rules.values import Grammar

__all__ = [
    "ANNOTATIONS_PAGE",
    "Key",
    "KeyReader",
    "Problem",
    "did_you_mean",
    "unknown_key_problem",
    "unknown_key_problems",
]

T = TypeVar("T")

#: The reference page that lists every key, named in the message of an unknown one.
ANNOTATIONS_PAGE = "docs/annotations.md"


@dataclass(frozen=True, slots=True)
class Key(Generic[T]):
    """One annotation as a user sees it (its row of docs/annotations.md) and its grammar.

    ``default`` is the annotation text that gives the default (empty: unset
    means "not used", or ``default_note`` says what it depends on); a unit
    test parses each one and checks it changes nothing.
    """

    name: str
    grammar: Grammar[T]
    default: str
    allowed: str  # the reference page's words (may name another key's value)
    meaning: str
    default_note: str = ""

    def parse(self, text: str) -> T:
        """The value ``text`` says; ``ValueError`` when the grammar refuses it."""
        return self.grammar.parse(text)

    def default_value(self) -> T:
        """The value of ``default`` (``ValueError`` for a key without a fixed default)."""
        if not self.default:
            raise ValueError(f"{self.name} has no fixed default")
        return self.grammar.parse(self.default)


@dataclass(frozen=True, slots=True)
class Problem:
    """One bad annotation: its key, its value, and what is allowed."""

    key: str
    value: str
    allowed: str
    unsupported: bool = False  # a valid value this build cannot act on
    unknown: bool = False  # the key itself is not known: ``allowed`` says what to do

    def __str__(self) -> str:
        if self.unknown:
            return f'{self.key}: "{self.value}" {self.allowed}'
        verdict = "is not supported yet" if self.unsupported else "is not allowed"
        return f'{self.key}: "{self.value}" {verdict}; allowed: {self.allowed}'


class KeyReader:
    """Reads keys one at a time from ``annotations``, collecting problems instead of stopping."""

    def __init__(self, annotations: Mapping[str, str]) -> None:
        self.annotations = annotations
        self.problems: list[Problem] = []

    def bad(self, key: Key[Any] | str, allowed: str, *, unsupported: bool = False) -> None:
        """Record ``key``'s value as bad, with what is allowed."""
        name = key if isinstance(key, str) else key.name
        self.problems.append(Problem(name, self.annotations.get(name, ""), allowed, unsupported))

    def get(self, key: Key[T], *, says: str = "") -> T | None:
        """``key``'s value, ``None`` when unset or bad (a bad one is recorded, with
        ``says`` in place of the grammar's words where the caller knows more)."""
        text = self.annotations.get(key.name)
        if text is None:
            return None
        try:
            return key.parse(text)
        except ValueError as exc:
            allowed = says or key.grammar.says
            self.bad(key, f"{allowed} ({exc})" if key.grammar.detail else allowed)
            return None

    def value(self, key: Key[T], *, says: str = "") -> T:
        """``key``'s value, or its default when unset or bad (a bad one is recorded)."""
        got = self.get(key, says=says)
        return key.default_value() if got is None else got

    def last_was_bad(self, key: Key[Any]) -> bool:
        """Whether the latest problem recorded is ``key``'s."""
        return bool(self.problems) and self.problems[-1].key == key.name


def did_you_mean(key: str, known: Sequence[str]) -> str:
    """`` (did you mean K?)`` for the known key closest to ``key``, or ``""`` when none is close.

    Closeness is difflib's ratio over the names after the prefix (the shared
    prefix would make every key look close), with the cut-off of
    ``difflib.get_close_matches``: ``max-scal`` finds ``max-scale``,
    ``placement.tidal.dev/baseline`` finds ``on-demand-baseline``,
    ``autoscaling.tidal.dev/policy`` finds ``placement.tidal.dev/policy``.
    """
    by_name = {k.rpartition("/")[2]: k for k in reversed(known)}
    close = difflib.get_close_matches(key.rpartition("/")[2], list(by_name), n=1, cutoff=0.6)
    return f" (did you mean {by_name[close[0]]}?)" if close else ""


def unknown_key_problem(key: str, value: str, known: Sequence[str]) -> Problem:
    """The problem of ``key``, under one of our prefixes but not in ``known``.

    The message names the closest known key and points at the reference page
    rather than listing every key: an Event message holds 1,024 bytes and the
    list alone is longer.
    """
    return Problem(
        key,
        value,
        f"is not a known key, ignored{did_you_mean(key, known)}; every key: {ANNOTATIONS_PAGE}",
        unknown=True,
    )


def unknown_key_problems(
    annotations: Mapping[str, str],
    *,
    prefixes: tuple[str, ...],
    known: Sequence[str],
    also_known: frozenset[str] = frozenset(),
) -> tuple[Problem, ...]:
    """Every key under ``prefixes`` that is neither in ``known`` nor in ``also_known``
    (keys read elsewhere or written by Tidal), each with the closest of ``known``."""
    listed = frozenset(known) | also_known
    return tuple(
        unknown_key_problem(key, value, known)
        for key, value in annotations.items()
        if key.startswith(prefixes) and key not in listed
    )
