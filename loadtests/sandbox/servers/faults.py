"""Scripted misbehaviour for the fake model servers.

Three faults, each off by default and decided per request from one seeded
random generator, so a test that sets a seed sees the same sequence:

- ``fail_rate``: this share of inference requests is answered with a 5xx
  (``fail_status``, 500 by default) and an error body in the engine's shape,
  before any work is queued;
- ``break_stream_rate``: this share of *streaming* requests has its
  connection cut (a TCP reset, no ``[DONE]``) once half its tokens have gone
  out, as when a server dies mid-response;
- ``crash_after_s``: the whole server dies this long after it became ready
  (a process exits with status ``crash_exit_code``; an in-process server
  drops every connection and stops listening).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

__all__ = ["FaultInjector", "Faults"]


@dataclass(frozen=True, slots=True)
class Faults:
    fail_rate: float = 0.0
    fail_status: int = 500
    break_stream_rate: float = 0.0
    crash_after_s: float | None = None
    crash_exit_code: int = 70
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("fail_rate", "break_stream_rate"):
            value = getattr(self, name)
            if not (0.0 <= value <= 1.0):
                raise ValueError(f"{name} must be a share between 0 and 1; got {value!r}")
        if not (500 <= self.fail_status <= 599):
            raise ValueError(f"fail_status must be a 5xx status; got {self.fail_status}")
        if self.crash_after_s is not None and not (
            math.isfinite(self.crash_after_s) and self.crash_after_s >= 0
        ):
            raise ValueError(f"crash_after_s must be >= 0 seconds; got {self.crash_after_s!r}")


class FaultInjector:
    """Per-request decisions for one server."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self._rng = random.Random(faults.seed)

    def should_fail(self) -> bool:
        return self.faults.fail_rate > 0 and self._rng.random() < self.faults.fail_rate

    def break_after(self, output_tokens: int) -> int | None:
        """Tokens after which to cut this stream, or None to let it finish."""
        rate = self.faults.break_stream_rate
        if rate > 0 and self._rng.random() < rate:
            return max(1, output_tokens // 2)
        return None
