"""The activator's log of the requests it answers itself: each kind said, none flooding.

Every answer of the activator's own (a 404 for a model it does not route, a
400 for a body it cannot read, a 503 while a model cannot be woken...) is
counted in ``tidal_activator_rejections_total``; an operator reading the log
should see them too, with the target where one is known and the message the
client got.

Main decision: **one line per kind and target per interval**. A client
that sends the same bad request in a loop must not fill the disk, and the
first of a kind is what tells an operator something is wrong. So the first
refusal of a (code, target) pair is logged at once; later ones within
``interval_s`` are only counted, and the next line logged for that pair
says how many were left out. Client mistakes (4xx) are logged at INFO, the
activator's and the model's troubles (5xx) at WARNING. The decision is pure:
the caller passes ``now``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

__all__ = ["RefusalLog"]


@dataclass(slots=True)
class RefusalLog:
    """Which refusals to log now (see the module docstring)."""

    interval_s: float = 10.0
    # What the line says was done: ``refused`` (an answer of the activator's own)
    # or ``cut`` (an answer cut before its end: its status is the replica's, 0 here).
    verb: str = "refused"
    _logged_at: dict[tuple[str, str], float] = field(default_factory=dict)
    _left_out: dict[tuple[str, str], int] = field(default_factory=dict)

    def note(
        self, *, status: int, code: str, target: str, message: str, now: float
    ) -> tuple[int, str] | None:
        """The (level, line) to log for this refusal at ``now``, or None when a line for
        the same code and target was logged less than ``interval_s`` ago."""
        key = (code, target)
        last = self._logged_at.get(key)
        if last is not None and now - last < self.interval_s:
            self._left_out[key] = self._left_out.get(key, 0) + 1
            return None
        self._logged_at[key] = now
        left_out = self._left_out.pop(key, 0)
        said = f"{self.verb} {status} {code}" if status else f"{self.verb} {code}"
        line = f"{said} (target {target or '-'}): {message}"
        if left_out:
            line += f" [and {left_out} more like it in the last {self.interval_s:g}s]"
        return (logging.WARNING if status >= 500 else logging.INFO), line
