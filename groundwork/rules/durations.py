"""Durations as annotations, routes files and flags write them: one grammar for every reader.

A duration is Go's (``time.ParseDuration``, what Kubernetes and its users
write): one or more numbers each with a unit, ``ns``, ``us`` (or ``µs``),
``ms``, ``s``, ``m``, ``h``, summed: ``90s``, ``1h30m``, ``1.5h``,
``250ms``, ``.5s``. A bare ``0`` is zero, as in Go, where ``time.Duration(0)``
prints as ``0s`` and parses back from ``0``.

Main decisions:

- **``0`` is zero, not an error.** Go accepts it, and so did the scaler; the
  activator refused it, so the same annotation meant zero to one service and
  a typo to the other. Whether zero is *allowed* is the key's range, not the
  grammar's: ``scale-down-delay: 0`` is no delay, ``cold-start-timeout: 0``
  is outside 1s..1h and refused with that range in the message.
- **No sign.** Go takes ``-5m`` and ``+5m``; no setting of Tidal can be
  negative, so a sign is refused rather than read as a typo's zero.
- **Any other bare number is refused** (``90``: seconds or minutes?), as Go
  refuses it. A routes file's YAML number is a different thing, seconds
  by the file's own rule; its strings still come here.
"""

from __future__ import annotations

import re

__all__ = ["DURATION_SYNTAX", "format_duration", "parse_duration_s"]

#: What a duration may look like, for an error message or a help text.
DURATION_SYNTAX = "a Go-style duration such as 250ms, 90s, 5m or 1h30m (units ns, us, ms, s, m, h)"

_UNIT_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 MICRO SIGN, as Go accepts
    "μs": 1e-6,  # U+03BC GREEK SMALL LETTER MU, as Go accepts
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# A number (digits, a point, digits; at least one digit) and its unit. The
# longer units come first so that "ms" is never read as "m" then "s".
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration_s(text: str) -> float:
    """Seconds in ``text`` (blanks around it ignored); ``ValueError`` says what is allowed."""
    value = text.strip()
    if value == "0":
        return 0.0
    if value[:1] in ("-", "+"):
        raise ValueError(f"{text!r} is not a duration: no sign is allowed; {DURATION_SYNTAX}")
    total = 0.0
    pos = 0
    while pos < len(value):
        match = _PART.match(value, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if not value or pos != len(value):
        raise ValueError(f"{text!r} is not a duration; {DURATION_SYNTAX}")
    return total


def format_duration(seconds: float) -> str:
    """``seconds`` in the largest of ``h``, ``m``, ``s``, ``ms`` that says it whole (else
    seconds): ``2h``, ``5m``, ``90s``, ``100ms``, ``1.5s``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    millis = seconds * 1000
    if 0 < seconds < 1 and millis == round(millis):
        return f"{round(millis)}ms"
    return f"{seconds:g}s"
