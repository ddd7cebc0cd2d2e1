"""Each model's traffic in ``tidal simulate``'s shared pool, as the scaler would see it.

The pool's pure rules (:mod:`scaler.policy.warm_tier`) judge a model by its
idle gaps (:class:`~scaler.policy.idle.keep_alive.IdleGaps`, the same the
scaler keeps per model): the mean gap, and the chance that a request comes
within a cold start. :class:`PoolTraffic` keeps each model's gaps across
its pods (a model keeps its rhythm when its pod goes to zero and back) and
answers those two questions as the books' rules ask them
(:class:`~simulator.pool_books.ModelOdds`).

Main decision: **a gap is known when the scaler would know it.** A request
opens a busy spell at its arrival; the spell's end, known to the
simulator as soon as the request is served, joins the gaps only once that
time has passed, as the scaler sees a pod go idle only when it does.
"""

from __future__ import annotations

from scaler.policy.idle.keep_alive import IdleGaps
from scaler.policy.warm_tier import mean_gap_s
from simulator.pool_books import PoolBooks

__all__ = ["PoolTraffic"]


class PoolTraffic:
    """Each model's idle gaps and the end of its last busy spell."""

    def __init__(self, books: PoolBooks, *, horizon_s: float) -> None:
        self._books = books
        self._horizon_s = horizon_s  # "soon": within a cold start
        self._gaps: dict[str, IdleGaps] = {}
        self._last_end: dict[str, float] = {}

    def gaps_at(self, model: str, now: float) -> IdleGaps:
        """The model's idle gaps as the scaler would see them at ``now``."""
        gaps = self._gaps.get(model) or IdleGaps(started_s=now)
        end = self._last_end.get(model)
        if end is not None and end <= now:
            gaps = gaps.observe(busy=False, now=end)
        return gaps

    def mean_gap(self, model: str) -> float | None:
        return mean_gap_s(self.gaps_at(model, self._books.now))

    def p_soon(self, model: str) -> float:
        now = self._books.now
        return self.gaps_at(model, now).p_request_within(self._horizon_s, now)

    def arrived(self, model: str, at: float) -> None:
        """A request for ``model`` at ``at``: a busy spell begins (or goes on)."""
        self._gaps[model] = self.gaps_at(model, at).observe(busy=True, now=at)

    def busy_until(self, model: str, end: float) -> None:
        """The model's current busy spell ends at ``end``."""
        self._last_end[model] = end

    def last_end(self, model: str) -> float:
        """When the model's last busy spell ends (0: none yet)."""
        return self._last_end.get(model, 0.0)
