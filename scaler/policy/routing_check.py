"""The scaler's check of a Deployment's ``routing.tidal.dev/*`` annotations.

Routing belongs to the activator, which reads these annotations, uses the
default for a bad value (one typo must not take a model off the data path)
and ignores a key it does not know. Left there, a typo shows only in an
activator's log. The scaler, which watches the same Deployments and already
raises Events on them, checks them too, so that each problem becomes an
``InvalidRouting`` Warning Event and a line in ``tidal status``.

Main decisions:

- **A warning, not a refusal.** Unlike an ``autoscaling.tidal.dev/``
  problem, a routing problem does not stop scaling: the activator routes
  with the defaults meanwhile, so the model is served.
- **Unknown keys are typos** (``routing.tidal.dev/model`` for ``models``),
  named with the closest known key and a pointer to the reference page, as
  :mod:`scaler.policy.annotations` does (the list of every key would not
  fit an Event's 1,024 bytes).
- **The same rules as the activator.** The scaler cannot import the
  activator (they talk over HTTP), so the keys and ranges are stated here
  again; a unit test runs both checks over the same annotations and fails
  when they disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from scaler.policy.annotations import (
    ANNOTATIONS_PAGE,
    AnnotationProblem,
    parse_duration_s,
    unknown_key_problem,
)

__all__ = ["ROUTING_KEYS", "ROUTING_PREFIX", "routing_problems"]

ROUTING_PREFIX = "routing.tidal.dev/"


def _duration_1s_1h(value: str) -> bool:
    try:
        return 1.0 <= parse_duration_s(value) <= 3600.0
    except ValueError:
        return False


def _whole(lo: int, hi: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        text = value.strip()
        return bool(re.fullmatch(r"[+-]?\d+", text)) and lo <= int(text) <= hi

    return check


def _port(value: str) -> bool:
    text = value.strip()
    if text.isdigit():
        return 0 < int(text) < 65536
    return bool(text)


def _anything(value: str) -> bool:
    return True


_ADAPTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_ADAPTER_SOURCE = re.compile(r"[^\s,=]+")


def _adapters(value: str) -> bool:
    """``name=source, ...``: names unique, each source a path or hub id without spaces."""
    names: set[str] = set()
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, source = item.partition("=")
        name, source = name.strip(), source.strip()
        if not sep or not _ADAPTER_NAME.fullmatch(name) or not _ADAPTER_SOURCE.fullmatch(source):
            return False
        if name in names:
            return False
        names.add(name)
    return bool(names)


def _dns_name(value: str) -> bool:
    return bool(re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", value.strip()))


def _priority(value: str) -> bool:
    # groundwork.priority.parse_priority, restated (scaler.policy imports no Tidal code).
    text = value.strip().lower()
    if text in ("critical", "standard", "sheddable"):
        return True
    return bool(re.fullmatch(r"[+-]?[0-9]{1,7}", text)) and -1_000_000 <= int(text) <= 1_000_000


# key (after the prefix) -> (check, what is allowed), in the order of docs/annotations.md.
_RULES: dict[str, tuple[Callable[[str], bool], str]] = {
    "service": (_anything, "a Service name"),
    "port": (_port, "a port number 1..65535 or a port name"),
    "hosts": (_anything, "comma-separated host names"),
    "path-prefix": (lambda v: v.startswith("/"), "a path starting with '/'"),
    "models": (_anything, "comma-separated model names"),
    "adapters": (
        _adapters,
        "comma-separated name=source, each name once (letters, digits, '.', '_', '-') and "
        "each source a path or Hugging Face id without spaces",
    ),
    "adapters-configmap": (_dns_name, "a ConfigMap name (lowercase DNS name)"),
    "cold-start-timeout": (_duration_1s_1h, "a duration from 1s to 1h, such as 10m"),
    "max-buffered": (_whole(0, 100_000), "a whole number 0..100000"),
    "container-concurrency": (_whole(0, 10_000), "a whole number 0..10000 (0: no limit)"),
    "balancing": (
        lambda v: v.strip() in ("least-loaded", "prefix"),
        "least-loaded or prefix",
    ),
    "resend-unanswered": (
        lambda v: v.strip().lower() in ("true", "false"),
        "true or false",
    ),
    "default-priority": (
        _priority,
        "critical, standard, sheddable or a whole number -1000000..1000000",
    ),
    "shed-at-zero": (
        lambda v: v.strip().lower() in ("true", "false"),
        "true or false",
    ),
}

#: Every routing annotation the activator reads.
ROUTING_KEYS: tuple[str, ...] = tuple(ROUTING_PREFIX + key for key in _RULES)


def routing_problems(annotations: Mapping[str, str]) -> tuple[AnnotationProblem, ...]:
    """Every bad ``routing.tidal.dev/*`` annotation (unknown key or value out of range)."""
    problems = []
    for key, value in annotations.items():
        if not key.startswith(ROUTING_PREFIX):
            continue
        rule = _RULES.get(key[len(ROUTING_PREFIX) :])
        if rule is None:
            problems.append(unknown_key_problem(key, value, ROUTING_KEYS, ANNOTATIONS_PAGE))
        elif not rule[0](value):
            problems.append(AnnotationProblem(key, value, rule[1]))
    return tuple(problems)
