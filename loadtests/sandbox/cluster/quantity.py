"""Kubernetes quantities and durations as the sandbox reads them.

``parse_quantity`` turns resource quantities (``"500m"``, ``"16Gi"``, ``"8"``,
``"1e3"``) into floats of the base unit, as the scheduler needs them to add
up requests against a node's allocatable. ``parse_duration`` reads the
Go-style durations the sandbox's annotations and flags use (``"90s"``,
``"1m30s"``, ``"250ms"``; a bare number is seconds). Both raise ``ValueError``
naming the value and the accepted forms.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration", "parse_quantity"]

_SUFFIXES = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_quantity(value: str | int | float) -> float:
    """A resource quantity in its base unit (cores, bytes, devices)."""
    if isinstance(value, bool):
        raise ValueError(f"quantity {value!r} is not a number")
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise ValueError(
            f"quantity {value!r} is not valid: expected a number with an optional "
            "suffix (m, k, M, G, T, Ki, Mi, Gi, Ti, ...), e.g. '500m' or '16Gi'"
        )
    return float(match.group(1)) * _SUFFIXES[match.group(2)]


def parse_duration(value: str | int | float) -> float:
    """A Go-style duration (``90s``, ``1m30s``, ``250ms``) or bare seconds, in seconds."""
    if isinstance(value, bool):
        raise ValueError(f"duration {value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            pos, seconds = 0, 0.0
            while pos < len(text):
                match = _DURATION_PART.match(text, pos)
                if match is None:
                    raise ValueError(
                        f"duration {value!r} is not valid: expected e.g. '30s', '1m30s', "
                        "'250ms' or a number of seconds"
                    ) from None
                seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
                pos = match.end()
            if not text:
                raise ValueError("duration '' is empty: expected e.g. '30s'") from None
    if seconds < 0:
        raise ValueError(f"duration {value!r} is negative: it must be 0 or more")
    return seconds
