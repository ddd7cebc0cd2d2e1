"""Kubernetes quantities and durations as the sandbox reads them.

``parse_quantity`` turns resource quantities (``"500m"``, ``"16Gi"``, ``"8"``,
``"1e3"``) into floats of the base unit, as the scheduler needs them to add
up requests against a node's allocatable. ``parse_duration`` reads the
Go-style durations the sandbox's annotations and flags use (``"90s"``,
``"1m30s"``, ``"250ms"``: Tidal's own grammar, :mod:`groundwork.rules.durations`;
a bare number is seconds). Both raise ``ValueError`` naming the value and the
accepted forms.

``canonical_quantity`` writes a quantity as a real API server stores and
returns it (``resource.Quantity``'s canonical string): a JSON number ``1``
becomes ``"1"``, ``0.5`` becomes ``"500m"``, ``"1000m"`` becomes ``"1"``,
``"1024Mi"`` becomes ``"1Gi"``. Main decision: the arithmetic is exact
(``Decimal``, never a float), as Kubernetes' is, so a canonical form never
differs from the real server's by a rounding error; values finer than one
nano-unit round up (away from zero), as Kubernetes rounds them.
"""

from __future__ import annotations

import re
from decimal import ROUND_UP, Decimal, InvalidOperation, localcontext

from groundwork.rules.durations import parse_duration_s

__all__ = ["canonical_quantity", "parse_duration", "parse_quantity"]

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


# Exact forms of the suffixes for canonical_quantity: powers of 1024 by
# position, powers of ten by exponent.
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_EXPONENTS = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIXES = {exponent: suffix for suffix, exponent in _DECIMAL_EXPONENTS.items()}
_NANO = Decimal("1e-9")


def canonical_quantity(value: str | int | float) -> str:
    """``value`` as the canonical string a real API server returns for a quantity.

    The suffix chooses the format, as in Kubernetes: a binary suffix (``Ki``,
    ``Mi``...) gives a binary form while the value is a whole number of at
    least 1024 in size, an exponent (``1e3``) an exponent form, anything else
    (a bare number, ``m``, ``k``, ``M``...) the decimal SI form, with the
    largest suffix that keeps the number whole.
    """
    if isinstance(value, bool):
        raise ValueError(f"quantity {value!r} is not a number")
    text = repr(value) if isinstance(value, float) else str(value)
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(
            f"quantity {value!r} is not valid: expected a number with an optional "
            "suffix (m, k, M, G, T, Ki, Mi, Gi, Ti, ...), e.g. '500m' or '16Gi'"
        )
    number, suffix = match.group(1), match.group(2)
    with localcontext() as context:
        context.prec = 80
        try:
            mantissa = Decimal(number)
        except InvalidOperation:
            raise ValueError(
                f"quantity {value!r} is not valid: {number!r} is not a number"
            ) from None
        if suffix in _BINARY_SUFFIXES[1:]:
            amount = mantissa * Decimal(1024) ** _BINARY_SUFFIXES.index(suffix)
        else:
            amount = mantissa * Decimal(10) ** _DECIMAL_EXPONENTS[suffix]
        amount = amount.quantize(_NANO, rounding=ROUND_UP)
        if amount == 0:
            return "0"
        binary = suffix in _BINARY_SUFFIXES[1:]
        exponent_form = "e" in number.lower()
        if binary and abs(amount) >= 1024 and amount == amount.to_integral_value():
            return _binary_form(int(amount))
        return _decimal_form(amount, exponent_form=exponent_form)


def _binary_form(amount: int) -> str:
    power = 0
    while power < len(_BINARY_SUFFIXES) - 1 and amount % 1024 == 0:
        amount //= 1024
        power += 1
    return f"{amount}{_BINARY_SUFFIXES[power]}"


def _decimal_form(amount: Decimal, *, exponent_form: bool) -> str:
    # Scale to a whole number of nano-units, then take out powers of 1000
    # while the number stays whole.
    whole = int(amount.scaleb(9))
    exponent = -9
    while exponent < 18 and whole % 1000 == 0:
        whole //= 1000
        exponent += 3
    if exponent_form:
        return f"{whole}e{exponent}" if exponent else str(whole)
    return f"{whole}{_DECIMAL_SUFFIXES[exponent]}"


def parse_duration(value: str | int | float) -> float:
    """A Go-style duration (``90s``, ``1m30s``, ``250ms``) or bare seconds, in seconds."""
    if isinstance(value, bool):
        raise ValueError(f"duration {value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        try:
            seconds = float(value.strip())
        except ValueError:
            if not value.strip():
                raise ValueError("duration '' is empty: expected e.g. '30s'") from None
            try:
                seconds = parse_duration_s(value)
            except ValueError as exc:
                raise ValueError(f"duration {exc}, or a number of seconds") from None
    if seconds < 0:
        raise ValueError(f"duration {value!r} is negative: it must be 0 or more")
    return seconds
