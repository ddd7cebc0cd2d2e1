"""Each target's failed writes in a row: its backoff, and when a Warning is due.

A failure other than a conflict (4xx such as 422 or 403, 5xx, an
unreachable API server) puts the target in backoff, doubling from
``backoff_base_s`` to ``backoff_max_s``, instead of being retried at every
tick; the actuator lets an activation (waking from zero) through anyway. A
conflict counts but does not back off: the decision made again on the
re-read Deployment is the retry. After ``warn_after`` failures in a row a
``WritesFailing`` Warning is due, once per streak; a write that goes
through ends the streak. Every failure is counted in
``tidal_scaler_write_failures_total``.
"""

from __future__ import annotations

from dataclasses import dataclass

from groundwork.kube.errors import Conflict, KubeError
from scaler.metrics import Metrics

__all__ = ["WriteFailures"]


@dataclass(slots=True)
class _Streak:
    failures: int = 0
    retry_at: float = 0.0
    warned: bool = False


class WriteFailures:
    """The failure streak of every target whose writes failed, by key."""

    def __init__(
        self, metrics: Metrics, *, backoff_base_s: float, backoff_max_s: float, warn_after: int
    ) -> None:
        self._metrics = metrics
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._warn_after = warn_after
        self._streaks: dict[str, _Streak] = {}

    def backing_off(self, key: str, now: float) -> bool:
        """True while ``key``'s writes wait out a backoff after failures."""
        streak = self._streaks.get(key)
        return streak is not None and now < streak.retry_at

    def failures(self, key: str) -> int:
        """``key``'s failed writes in a row."""
        streak = self._streaks.get(key)
        return streak.failures if streak is not None else 0

    def failed(self, key: str, exc: KubeError, now: float) -> bool:
        """Count a failed write at ``now`` and back off (not after a conflict); True when
        the streak is long enough for its one ``WritesFailing`` Warning."""
        self._metrics.write_failed(key)
        streak = self._streaks.setdefault(key, _Streak())
        streak.failures += 1
        if not isinstance(exc, Conflict):
            delay = min(self._backoff_max_s, self._backoff_base_s * 2 ** (streak.failures - 1))
            streak.retry_at = now + delay
        if streak.failures >= self._warn_after and not streak.warned:
            streak.warned = True
            return True
        return False

    def succeeded(self, key: str) -> None:
        """A plan went through: the streak, if any, is over."""
        self._streaks.pop(key, None)

    def forget(self, key: str) -> None:
        """``key`` is no longer a target."""
        self._streaks.pop(key, None)
