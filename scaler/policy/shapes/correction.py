"""A shape's need corrected by what its own servers measured (pure, time passed in).

Each shape's need comes from the policy's sizing at that shape's learned
capacity (:mod:`scaler.policy.shapes.decide`). A model of a server can be
wrong about a device it has seen little of, and the mix
(:mod:`scaler.policy.shapes.mix`) is drawn to exactly those errors: a shape
whose need is underestimated looks cheap, gets the load, and misses. So the
mix is steered by what each shape's replicas deliver: the share of first
tokens their servers' TTFT histograms counted within the objective (the
shape's own :class:`~scaler.policy.slo.state.MeasuredAttainment`, timed
from reaching a replica: a wait for a cold start is not in it) over the
last :data:`WINDOW_S` (for a quiet shape, the ten minutes the measured
attainment keeps), once :data:`MIN_COUNTED` first tokens are counted.
A shape is **short** when its share is under its *reference* by more than
:data:`LAG` and more than chance. The reference is the best other shape's
share over the same window where another shape serves too: against the
other shapes, not the goal, since a burst that every shape misses says
nothing against one of them. A shape other than the base that serves
alone is held to the goal (the base shape would have met it, or the
policy's own loop corrects the base as it corrects a model with no
shapes). A short shape's need is
multiplied by one plus twice the shortfall (between :data:`RAISE_MIN` and
:data:`RAISE_MAX`), at most once per window (time for the replicas it buys
to come and show) and up to :data:`MAX_FACTOR`. At or above the goal, or
level with the best, the factor fades back toward 1 over :data:`FADE_S`.

A shape still short at :data:`MAX_FACTOR` is **unfit**
(:meth:`Correction.unfit`): the caller caps it at zero for a while
(:mod:`scaler.policy.shapes.availability`), as it does a shape whose pods
stay Pending.

Main decision: the base shape serving alone is the policy's own business:
its state sees all the load and all the replicas, and the policy's loop on
the measured attainment (:meth:`~scaler.policy.slo.state.SloState.corrected`)
corrects it as it corrects a model with no shapes, so a model that settles
on its base shape runs as it would without shapes. Any other shape has to
keep up with the base's standard, since the model chose it to save money,
not to miss more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaler.policy.slo.state import MeasuredAttainment

__all__ = [
    "FADE_S",
    "LAG",
    "MAX_FACTOR",
    "MIN_COUNTED",
    "RAISE_MAX",
    "RAISE_MIN",
    "WINDOW_S",
    "Correction",
    "recent_share",
]

#: The window the attainment is measured over, and the least time between raises:
#: two minutes, a cold start or two for the replicas a raise buys.
WINDOW_S = 120.0
#: First tokens counted on the shape in the window before its attainment says anything.
MIN_COUNTED = 30.0
#: How far under its reference a shape is short (a share).
LAG = 0.02
RAISE_MIN = 1.1
RAISE_MAX = 2.0
MAX_FACTOR = 4.0
FADE_S = 600.0


def recent_share(measured: MeasuredAttainment | None, now: float) -> tuple[float, float] | None:
    """The share within the objective over the last :data:`WINDOW_S` and the first
    tokens it counts; for a shape too quiet for that, over all the measured history
    keeps (ten minutes); None: fewer than :data:`MIN_COUNTED` even so."""
    if measured is None:
        return None
    within, counted = measured.since(now - WINDOW_S)
    if counted < MIN_COUNTED:
        within, counted = measured.since(-math.inf)
    return (within / counted, counted) if counted >= MIN_COUNTED else None


def _noise(share: float, counted: float) -> float:
    """Three binomial deviations of a share measured over ``counted`` first tokens."""
    q = min(max(1.0 - share, 1.0 / counted), 1.0)
    return 3.0 * math.sqrt(q * (1.0 - q) / counted)


@dataclass(frozen=True, slots=True)
class Correction:
    """A shape's need factor and when it was last raised."""

    factor: float = 1.0
    raised_at_s: float | None = None

    def after(
        self,
        own: tuple[float, float] | None,
        *,
        reference: float | None,
        goal: float,
        now: float,
        interval_s: float,
    ) -> Correction:
        """The correction after the shape's recent share (``own``, from
        :func:`recent_share`) against its ``reference`` (None: none; see the module
        docstring); ``interval_s`` since the last decision."""
        if own is None:
            return self
        share, counted = own
        short = reference is not None and share < reference - max(LAG, _noise(share, counted))
        waited = self.raised_at_s is None or now - self.raised_at_s >= WINDOW_S
        if short and waited and reference is not None:
            step = min(RAISE_MAX, max(RAISE_MIN, 1.0 + 2.0 * (reference - share)))
            return Correction(min(MAX_FACTOR, self.factor * step), now)
        if self.factor > 1.0 and not short and share >= min(goal, reference or goal):
            fade = math.exp(-max(0.0, interval_s) / FADE_S)
            return Correction(1.0 + (self.factor - 1.0) * fade, self.raised_at_s)
        return self

    def need(self, desired: int) -> int:
        """``desired`` replicas of the shape, corrected (0 stays 0)."""
        return 0 if desired <= 0 else math.ceil(desired * self.factor - 1e-9)

    def unfit(self, own: tuple[float, float] | None, reference: float | None) -> str | None:
        """Why the shape is unfit (module docstring), or None: at the largest factor and
        still short of its reference."""
        if own is None or reference is None or self.factor < MAX_FACTOR:
            return None
        share, counted = own
        if share >= reference - max(LAG, _noise(share, counted)):
            return None
        return (
            f"its servers kept {100 * share:.1f} % of {counted:.0f} first tokens within the"
            f" objective over the last {WINDOW_S:.0f}s with {MAX_FACTOR:g} times the replicas"
            f" its sizing asked for, short of {100 * reference:.1f} %"
        )
