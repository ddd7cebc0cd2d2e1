"""GPU utilization from busy time, the way DCGM and Triton sample it.

A GPU's utilization counter is "share of the last sample period in which a
kernel ran". Main decision: the meter keeps the busy total seen at its last
reading and answers, at each reading, the busy share of the period since then;
a reading closer than ``min_period_s`` to the last one repeats the last answer
(as an exporter that samples every second would), so two scrapes in a row do
not report a meaningless ratio over a few microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UtilizationMeter"]


@dataclass(slots=True)
class UtilizationMeter:
    min_period_s: float = 1.0
    _last_s: float | None = None
    _last_busy_s: float = 0.0
    _value: float = 0.0

    def read(self, *, now: float, busy_s: float) -> float:
        """Utilization (0..1) over the period since the previous reading."""
        if self._last_s is None:
            self._last_s, self._last_busy_s = now, busy_s
            return self._value
        period = now - self._last_s
        if period < self.min_period_s:
            return self._value
        self._value = min(1.0, max(0.0, (busy_s - self._last_busy_s) / period))
        self._last_s, self._last_busy_s = now, busy_s
        return self._value
