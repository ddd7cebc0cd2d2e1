"""The grammars of annotation values: whole numbers, numbers, durations, choices, ports.

A :class:`Grammar` is a parser and the phrase that says what it allows
("an integer from 0 to 100000"); the parser returns the value or raises
``ValueError``, and the phrase is what a problem tells the user. Every key
of :mod:`groundwork.rules.routing_keys` and
:mod:`groundwork.rules.scaling_keys` is read with one of these, so the
activator and the scaler (and the simulator, which parses the same
annotations) give the same text the same verdict.

Main decisions, the forms a value may take (surrounding blanks are ignored
everywhere but in a path):

- **A whole number** is ASCII digits with an optional sign (``+3``, ``-0``);
  ``1.5``, ``1_000`` and other digit scripts are refused. A sign is allowed
  because a priority may be negative; a range refuses it elsewhere.
- **A number** is what Python's ``float`` reads, finite.
- **A duration** is :mod:`groundwork.rules.durations`'s.
- **A choice** is case-sensitive (``vllm``, not ``VLLM``): the values are
  identifiers, and Kubernetes' own are too. ``true``/``false`` is the
  exception, in any case, as YAML writes booleans.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from groundwork.rules.durations import format_duration, parse_duration_s

__all__ = [
    "ANYTHING",
    "COMMA_LIST",
    "CONTAINER_PORT",
    "DNS_NAME",
    "FLAG",
    "HTTP_URL",
    "PATH_PREFIX",
    "SERVICE_PORT",
    "Grammar",
    "duration_in",
    "number_where",
    "one_of",
    "whole_in",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Grammar(Generic[T]):
    """How a value is read (``parse`` raises ``ValueError``) and what it allows (``says``).

    ``detail``: a problem also quotes the parser's own message, where it says
    more than the phrase can (which adapter of a list is declared twice).
    """

    parse: Callable[[str], T]
    says: str
    detail: bool = False


def _whole(text: str) -> int:
    value = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        raise ValueError(f"{text!r} is not a whole number")
    return int(value)


def whole_in(low: int, high: int, *, says: str = "") -> Grammar[int]:
    """A whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        value = _whole(text)
        if not low <= value <= high:
            raise ValueError(f"{value} is outside {low}..{high}")
        return value

    return Grammar(parse, says or f"an integer from {low} to {high}")


def number_where(check: Callable[[float], bool], says: str) -> Grammar[float]:
    """A finite number that passes ``check`` (``says`` words the check)."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or not check(value):
            raise ValueError(f"{text!r} is not {says}")
        return value

    return Grammar(parse, says)


def duration_in(low_s: float, high_s: float, *, also: str = "") -> Grammar[float]:
    """A duration from ``low_s`` to ``high_s`` seconds (``also``: more the key allows)."""

    def parse(text: str) -> float:
        value = parse_duration_s(text)
        if not low_s <= value <= high_s:
            raise ValueError(
                f"{text!r} is outside {format_duration(low_s)}..{format_duration(high_s)}"
            )
        return value

    says = (
        f"a duration from {format_duration(low_s)} to {format_duration(high_s)} "
        f"(Go style, such as 90s, 5m, 1h30m){also}"
    )
    return Grammar(parse, says)


def one_of(*choices: str, says: str = "") -> Grammar[str]:
    """One of ``choices``, exactly (blanks around it ignored)."""

    def parse(text: str) -> str:
        value = text.strip()
        if value not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return value

    return Grammar(parse, says or "one of " + ", ".join(choices))


def _flag(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return value == "true"


#: ``true`` or ``false``, in any case.
FLAG = Grammar(_flag, "true or false")


def _service_port(text: str) -> int | str:
    value = text.strip()
    if value.isdigit():
        if 0 < int(value) < 65536:
            return int(value)
        raise ValueError(f"{value} is not a port number 1..65535")
    if not value:
        raise ValueError("an empty port")
    return value


#: A Service port: its number, or its name (looked up in the Service).
SERVICE_PORT = Grammar(_service_port, "a port number from 1 to 65535 or a port name")

_IANA_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?")


def _container_port(text: str) -> int | str:
    value = text.strip()
    if value.isdigit():
        number = int(value)
        if 1 <= number <= 65535:
            return number
        raise ValueError(f"{value} is not a port number 1..65535")
    # An IANA service name, as a container port's name: at most 15 characters,
    # lowercase letters, digits and inner single hyphens, at least one letter.
    if _IANA_NAME.fullmatch(value) and "--" not in value and re.search(r"[a-z]", value):
        return value
    raise ValueError(f"{text!r} is not a port name")


#: A container port: its number, or its name (IANA_SVC_NAME, as a Pod spec requires).
CONTAINER_PORT = Grammar(
    _container_port, "a port number from 1 to 65535 or a port name (IANA_SVC_NAME)"
)


def _path_prefix(text: str) -> str:
    if not text.startswith("/"):
        raise ValueError(f"{text!r} does not start with '/'")
    return text


#: A path prefix, as written (no blanks stripped: a path may not start with one).
PATH_PREFIX = Grammar(_path_prefix, "a path starting with '/'")


def _dns_name(text: str) -> str:
    value = text.strip()
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", value):
        raise ValueError(f"{text!r} is not a lowercase DNS name")
    return value


#: An object's name in Kubernetes (a DNS subdomain: lowercase, digits, '-', '.').
DNS_NAME = Grammar(_dns_name, "a lowercase DNS name, as Kubernetes names objects")


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


#: Comma-separated items, blanks and empty items dropped; any text is a list.
COMMA_LIST = Grammar(_comma_list, "comma-separated names")

#: Any text, blanks around it dropped.
ANYTHING = Grammar(str.strip, "any text")


def _http_url(text: str) -> str:
    value = text.strip()
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not an http or https URL with a host")
    try:
        parts.port  # noqa: B018 - reading it checks the port
    except ValueError:
        raise ValueError(f"{text!r} has a port that is not a number 1..65535") from None
    return value


#: An http(s) URL with a host (``http://epp.ml.svc:9090/metrics``).
HTTP_URL = Grammar(_http_url, "an http or https URL with a host, such as http://epp:9090/metrics")
