"""A request's priority class: what ``x-tidal-priority`` and the default annotation may say.

A class is an integer, higher first. The names ``critical``, ``standard`` and
``sheddable`` stand for 1, 0 and -1; any whole number in
``-1000000..1000000`` may be given instead (the Gateway API Inference
Extension's objectives carry an integer priority; negative ones are
sheddable there as here). The activator reads the header and the
``routing.tidal.dev/default-priority`` annotation with :func:`parse_priority`,
the scaler checks that annotation with it (:mod:`groundwork.rules.routing_keys`),
and the simulator reads a trace's class field with it, so all of them agree.

Main decision: a bad value parses to None and the caller uses the target's
default (the activator counts it): a priority only matters while a request
waits, so a typo in it must not cost the caller an answer that a free
replica could give at once. Metrics and ``tidal status`` show classes by
:func:`class_label`, three bounded values whatever integers clients send.
"""

from __future__ import annotations

__all__ = [
    "CRITICAL",
    "PRIORITY_ALLOWED",
    "PRIORITY_LABELS",
    "PRIORITY_RANGE",
    "SHEDDABLE",
    "STANDARD",
    "class_label",
    "parse_priority",
]

CRITICAL = 1
STANDARD = 0
SHEDDABLE = -1
_NAMES = {"critical": CRITICAL, "standard": STANDARD, "sheddable": SHEDDABLE}
_LIMIT = 1_000_000
#: The classes a whole number may name.
PRIORITY_RANGE = (-_LIMIT, _LIMIT)
PRIORITY_ALLOWED = "critical, standard, sheddable or a whole number -1000000..1000000"
# The label values metrics use, highest class first.
PRIORITY_LABELS = ("critical", "standard", "sheddable")


def parse_priority(value: str) -> int | None:
    """The class ``value`` names (case and surrounding blanks ignored), or None."""
    text = value.strip().lower()
    named = _NAMES.get(text)
    if named is not None:
        return named
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isdigit() or not digits.isascii() or len(digits) > 7:
        return None
    number = int(text)
    return number if -_LIMIT <= number <= _LIMIT else None


def class_label(priority: int) -> str:
    """``critical`` above 0, ``standard`` at 0, ``sheddable`` below: a bounded label."""
    if priority > 0:
        return "critical"
    return "standard" if priority == 0 else "sheddable"
