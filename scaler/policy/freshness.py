"""When a signal may lower the scale: the freshness rule (docs/architecture.md, "The scaler").

A signal's windows are evaluated at ``now`` into a
:class:`~scaler.policy.api.SignalReading`; its ``fresh`` flag decides whether
the policy may *lower* the scale on it (no data is not zero load).

Main decision, two conditions: the latest sample must be recent (within the
signal's own bound, longer for a signal fed only by a slow poll), *and* the
view it was combined from must be complete (every source behind the signal
fresh). A value recorded recently from a partial view (an activator answered,
a pod's scrape did not) can raise the scale, never lower it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from scaler.policy.api import ScalingConfig, SignalKind, SignalReading
from scaler.policy.windows import SignalWindows

__all__ = ["fresh_bounds", "readings"]


def fresh_bounds(
    fresh_within_s: float, by_kind: Mapping[SignalKind, float]
) -> dict[SignalKind, float]:
    """Per signal, how recent its latest sample must be: ``fresh_within_s``, or the
    signal's own longer bound."""
    return {kind: max(fresh_within_s, by_kind.get(kind, 0.0)) for kind in SignalKind}


def readings(
    windows: SignalWindows,
    config: ScalingConfig,
    *,
    complete: Mapping[SignalKind, bool],
    fresh_within_s: Mapping[SignalKind, float],
    now: float,
) -> dict[SignalKind, SignalReading]:
    """Every configured signal of ``config`` read at ``now``, freshness applied."""
    out = {}
    for kind in config.configured_signals():
        reading = windows.reading(
            kind,
            now,
            stable_window_s=config.window_s,
            panic_window_s=config.panic_window_s,
            fresh_within_s=fresh_within_s[kind],
        )
        if reading.fresh and not complete.get(kind, False):
            # Recorded recently, but from a partial view: may raise, never lower.
            reading = replace(reading, fresh=False)
        out[kind] = reading
    return out
