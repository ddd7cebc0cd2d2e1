"""Requests shed from a target's hold, counted by class and cause, in all and per report.

A shed request is answered ``503 shed``; which rule shed it (a higher class
took its place, its tenant held more than its share, or it was sheddable
while no replica was ready: :data:`~activator.holding.hold_errors.SHED_CAUSES`)
is what an operator must know to fix it, so each count carries it:
``tidal_activator_shed_total{class, cause}`` reads :attr:`ShedCounts.total`,
and the reporter takes the period's sum for the scaler (:meth:`ShedCounts.take`).
"""

from __future__ import annotations

__all__ = ["ShedCounts"]


class ShedCounts:
    """Sheds by (class label, cause) since the start, and their number since the last take."""

    __slots__ = ("in_period", "total")

    def __init__(self) -> None:
        self.total: dict[tuple[str, str], int] = {}
        self.in_period = 0

    def note(self, label: str, cause: str) -> None:
        """One request of class ``label`` was shed for ``cause``."""
        key = (label, cause)
        self.total[key] = self.total.get(key, 0) + 1
        self.in_period += 1

    def take(self) -> int:
        """Requests shed since the last call; resets."""
        got, self.in_period = self.in_period, 0
        return got
