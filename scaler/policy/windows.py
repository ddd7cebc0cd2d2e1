"""Time-bucketed windows: trailing averages of demand signals, and a trailing maximum.

Two shapes, both with time passed in (seconds on one monotonic timeline):

- :class:`TrailingAverages` (mutable, owned by the I/O side through
  :class:`SignalWindows`): samples go into buckets by the time they arrive;
  the stable and the panic average are evaluated at ``now`` over the trailing
  windows, as Knative's KPA metric windows do.
- :class:`MaxHold` (immutable, kept inside the policy state): the largest
  value recorded within a trailing window, as Knative's
  ``aggregation/max/timewindow.go`` does for the scale-down delay.

**Main decision: fixed rings with running sums, never lists scanned per tick.**
The scaler keeps 1,000 targets x 4 signals warm, with windows up to an hour,
and must stay under a quarter core and 300 MB. So a window is a ring of
buckets (two flat ``array`` columns: sum and count) plus running totals for
the stable and the panic window; recording a sample and reading an average
are O(1) amortised (a long silence clears at most one ring's worth once).
Buckets are 1 second wide for windows up to :data:`MAX_BUCKETS` seconds
(10 minutes); longer windows use ``ceil(window / MAX_BUCKETS)``-second
buckets, so a ring never holds more than 600 buckets: a 1-hour window gets
6-second buckets, and its panic window (10 % by default, 6 minutes) still
60 of them. Memory per signal is then at most ~7 KB (about 30 MB for the
worst case above) instead of ~60 KB with 3,600 one-second buckets.

Sums are kept as integers in micro-units (values are quantised to 1e-6),
which makes the running totals exact: adding and removing the same bucket
millions of times never leaves a residue such as ``1e-15`` that would read as
"some load" and keep a replica alive.

**An average is over the samples in the window, not over its seconds.** A
second without a sample is *missing data*, not zero load: the I/O side must
record an explicit ``0`` when a source reports zero, and must record totals
(one sample per source update, for example the sum over activators), not
parts. Whether the data is recent enough to trust is :attr:`SignalReading.fresh`.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from scaler.policy.api import ScalingConfig, SignalKind, SignalReading

__all__ = [
    "MAX_BUCKETS",
    "MaxHold",
    "SignalWindows",
    "TrailingAverages",
]

#: The most buckets one ring holds; windows longer than this many seconds use
#: wider buckets (see the module docstring).
MAX_BUCKETS = 600

# Values are stored as integers of this many units per 1.0 (exact sums).
_UNITS = 1_000_000


def _bucket_width_s(window_s: float) -> int:
    return max(1, math.ceil(window_s / MAX_BUCKETS))


def _check_time(now: float) -> None:
    if not math.isfinite(now):
        raise ValueError(f"time must be a finite number of seconds, got {now!r}")


class TrailingAverages:
    """Averages of one signal over a trailing stable window and a shorter panic window.

    The stable window at ``now`` covers the ``ceil(stable_window_s / width)``
    buckets ending with the one that holds ``now`` (the current, partial
    bucket included); the panic window the last ``ceil(panic_window_s /
    width)`` of them. A sample older than the stable window is dropped; a
    sample that arrives late (earlier than the newest bucket, but still in
    the window) counts in its own bucket.
    """

    __slots__ = (
        "_counts",
        "_head",
        "_last_value",
        "_n",
        "_panic_count",
        "_panic_n",
        "_panic_sum",
        "_stable_count",
        "_stable_sum",
        "_sums",
        "last_recorded_s",
        "panic_window_s",
        "stable_window_s",
        "width_s",
    )

    def __init__(self, *, stable_window_s: float, panic_window_s: float) -> None:
        if not (math.isfinite(stable_window_s) and stable_window_s > 0):
            raise ValueError(f"stable_window_s must be > 0 seconds, got {stable_window_s!r}")
        if not (math.isfinite(panic_window_s) and 0 < panic_window_s <= stable_window_s):
            raise ValueError(
                f"panic_window_s must be > 0 and <= stable_window_s ({stable_window_s}), "
                f"got {panic_window_s!r}"
            )
        self.stable_window_s = float(stable_window_s)
        self.panic_window_s = float(panic_window_s)
        self.width_s = _bucket_width_s(stable_window_s)
        self._n = max(1, math.ceil(stable_window_s / self.width_s))
        self._panic_n = min(self._n, max(1, math.ceil(panic_window_s / self.width_s)))
        self._sums = array("q", [0]) * self._n
        self._counts = array("I", [0]) * self._n
        # Absolute number of the newest bucket the ring covers (None: nothing yet).
        self._head: int | None = None
        self._stable_sum = 0
        self._stable_count = 0
        self._panic_sum = 0
        self._panic_count = 0
        self.last_recorded_s: float | None = None
        self._last_value: float | None = None

    @property
    def last_value(self) -> float | None:
        """The most recent sample (by arrival), or ``None``."""
        return self._last_value

    def _advance(self, bucket: int) -> None:
        """Move the ring forward so that ``bucket`` is the newest one."""
        head = self._head
        if head is None:
            self._head = bucket
            return
        if bucket <= head:
            return
        n, panic_n = self._n, self._panic_n
        if bucket - head >= n:
            # Silent for a whole window: everything has left it.
            for i in range(n):
                self._sums[i] = 0
                self._counts[i] = 0
            self._stable_sum = self._stable_count = 0
            self._panic_sum = self._panic_count = 0
        else:
            sums, counts = self._sums, self._counts
            for k in range(head + 1, bucket + 1):
                # Bucket k - panic_n leaves the panic window ...
                leaving = (k - panic_n) % n
                self._panic_sum -= sums[leaving]
                self._panic_count -= counts[leaving]
                # ... and bucket k - n leaves the ring, its slot becoming bucket k.
                slot = k % n
                self._stable_sum -= sums[slot]
                self._stable_count -= counts[slot]
                sums[slot] = 0
                counts[slot] = 0
        self._head = bucket

    def record(self, value: float, now: float) -> None:
        """Add a sample that arrived at ``now``.

        Raises ``ValueError`` for a negative or non-finite value: signals are
        counts and utilizations, and a NaN must not be read as load or as idle.
        """
        _check_time(now)
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"a signal sample must be a finite number >= 0, got {value!r}")
        bucket = math.floor(now / self.width_s)
        self._advance(bucket)
        head = self._head
        assert head is not None
        if bucket <= head - self._n:
            return  # older than the whole window
        units = round(value * _UNITS)
        slot = bucket % self._n
        self._sums[slot] += units
        self._counts[slot] += 1
        self._stable_sum += units
        self._stable_count += 1
        if bucket > head - self._panic_n:
            self._panic_sum += units
            self._panic_count += 1
        if self.last_recorded_s is None or now >= self.last_recorded_s:
            self.last_recorded_s = now
            self._last_value = value

    def averages(self, now: float) -> tuple[float | None, float | None]:
        """(stable, panic) averages at ``now``; ``None`` for a window with no sample."""
        _check_time(now)
        self._advance(math.floor(now / self.width_s))
        stable = self._stable_sum / self._stable_count / _UNITS if self._stable_count else None
        panic = self._panic_sum / self._panic_count / _UNITS if self._panic_count else None
        return stable, panic

    def resized(self, *, stable_window_s: float, panic_window_s: float) -> TrailingAverages:
        """A copy with other window lengths, keeping the samples that still fit.

        For a configuration change (rare): O(ring size). Each old bucket's
        samples move together to the new bucket that holds its start time.
        """
        new = TrailingAverages(stable_window_s=stable_window_s, panic_window_s=panic_window_s)
        new.restore(
            self.buckets(), last_recorded_s=self.last_recorded_s, last_value=self.last_value
        )
        return new

    def buckets(self) -> Iterator[tuple[int, int, float]]:
        """``(sum in units, samples, start time)`` of each bucket holding samples, oldest first."""
        if self._head is None:
            return
        for k in range(self._head - self._n + 1, self._head + 1):
            slot = k % self._n
            count = self._counts[slot]
            if count:
                yield self._sums[slot], count, k * self.width_s

    def restore(
        self,
        buckets: Iterable[tuple[int, int, float]],
        *,
        last_recorded_s: float | None,
        last_value: float | None,
    ) -> None:
        """Take in another window's :meth:`buckets` and its last sample (a resize)."""
        for units, count, at_s in buckets:
            self._add_raw(units, count, at_s)
        self.last_recorded_s = last_recorded_s
        self._last_value = last_value

    def _add_raw(self, units: int, count: int, at_s: float) -> None:
        bucket = math.floor(at_s / self.width_s)
        self._advance(bucket)
        head = self._head
        assert head is not None
        if bucket <= head - self._n:
            return
        slot = bucket % self._n
        self._sums[slot] += units
        self._counts[slot] += count
        self._stable_sum += units
        self._stable_count += count
        if bucket > head - self._panic_n:
            self._panic_sum += units
            self._panic_count += count


class SignalWindows:
    """One target's windows: a :class:`TrailingAverages` per :class:`SignalKind`.

    The I/O side records each sample when it arrives (``record``) and asks for
    a :class:`SignalReading` per configured signal at each decision
    (``reading``). A reading that asks for other window lengths than the
    windows have resizes them first (a changed annotation), keeping the data.
    """

    __slots__ = ("_panic_window_s", "_stable_window_s", "_windows")

    def __init__(self, *, stable_window_s: float = 60.0, panic_window_s: float = 6.0) -> None:
        # Validates the lengths once, here, rather than at the first sample.
        TrailingAverages(stable_window_s=stable_window_s, panic_window_s=panic_window_s)
        self._stable_window_s = float(stable_window_s)
        self._panic_window_s = float(panic_window_s)
        self._windows: dict[SignalKind, TrailingAverages] = {}

    @classmethod
    def for_config(cls, config: ScalingConfig) -> SignalWindows:
        """Windows sized for ``config`` (its stable and panic windows)."""
        return cls(stable_window_s=config.window_s, panic_window_s=config.panic_window_s)

    @property
    def stable_window_s(self) -> float:
        return self._stable_window_s

    @property
    def panic_window_s(self) -> float:
        return self._panic_window_s

    def configure(self, *, stable_window_s: float, panic_window_s: float) -> None:
        """Change the window lengths (keeping the samples that still fit)."""
        if stable_window_s == self._stable_window_s and panic_window_s == self._panic_window_s:
            return
        TrailingAverages(stable_window_s=stable_window_s, panic_window_s=panic_window_s)
        self._stable_window_s = float(stable_window_s)
        self._panic_window_s = float(panic_window_s)
        self._windows = {
            kind: window.resized(stable_window_s=stable_window_s, panic_window_s=panic_window_s)
            for kind, window in self._windows.items()
        }

    def record(self, kind: SignalKind, value: float, now: float) -> None:
        """Add one sample of ``kind`` that arrived at ``now`` (see ``TrailingAverages.record``)."""
        window = self._windows.get(kind)
        if window is None:
            window = TrailingAverages(
                stable_window_s=self._stable_window_s, panic_window_s=self._panic_window_s
            )
            self._windows[kind] = window
        window.record(value, now)

    def reading(
        self,
        kind: SignalKind,
        now: float,
        *,
        stable_window_s: float,
        panic_window_s: float,
        fresh_within_s: float,
    ) -> SignalReading:
        """The windows of ``kind`` evaluated at ``now``.

        ``fresh`` is true when the latest sample arrived at most
        ``fresh_within_s`` before ``now``. A kind never recorded reads as
        no data: ``SignalReading(None, None, fresh=False)``.

        The panic reading always holds at least the latest sample: a panic
        window shorter than the time between reports (1 s of a 6 s window,
        read at a tick 1.5 s after the last report) would otherwise read as no
        data, and a burst would be met late. So when the stable window holds
        samples and the panic window none, the panic average is the latest
        sample.
        """
        self.configure(stable_window_s=stable_window_s, panic_window_s=panic_window_s)
        window = self._windows.get(kind)
        if window is None:
            _check_time(now)
            return SignalReading(stable=None, panic=None, fresh=False)
        stable, panic = window.averages(now)
        if panic is None and stable is not None:
            panic = window.last_value
        last = window.last_recorded_s
        fresh = last is not None and now - last <= fresh_within_s
        return SignalReading(stable=stable, panic=panic, fresh=fresh)

    def readings(
        self, config: ScalingConfig, now: float, *, fresh_within_s: float
    ) -> Mapping[SignalKind, SignalReading]:
        """Readings of every signal ``config`` uses, with its window lengths."""
        return {
            kind: self.reading(
                kind,
                now,
                stable_window_s=config.window_s,
                panic_window_s=config.panic_window_s,
                fresh_within_s=fresh_within_s,
            )
            for kind in config.configured_signals()
        }

    def latest(self, kind: SignalKind) -> tuple[float, float] | None:
        """(value, arrived_at_s) of the newest sample of ``kind``, or ``None``."""
        window = self._windows.get(kind)
        if window is None or window.last_recorded_s is None or window.last_value is None:
            return None
        return window.last_value, window.last_recorded_s

    def forget(self, kind: SignalKind) -> None:
        """Drop every sample of ``kind`` (a signal no longer configured)."""
        self._windows.pop(kind, None)


@dataclass(frozen=True, slots=True)
class MaxHold:
    """The largest value recorded within a trailing window (immutable).

    Kept as a monotonic queue: ``entries`` are ``(recorded_at_s, value)``
    with times increasing and values strictly decreasing, so the front is the
    maximum and an entry that a later, larger value dominates is dropped at
    once. For desired replica counts (integers up to 1,000, and in practice a
    handful of distinct recent values) it stays a few entries long, so the
    policy state can copy it every decision.

    A value recorded at ``t`` is held while ``now - t < window_s``: it expires
    exactly ``window_s`` after it was recorded.
    """

    entries: tuple[tuple[float, int], ...] = ()

    def record(self, value: int, now: float, *, window_s: float) -> MaxHold:
        _check_time(now)
        kept = [entry for entry in self.entries if now - entry[0] < window_s]
        while kept and kept[-1][1] <= value:
            kept.pop()
        kept.append((now, value))
        return MaxHold(tuple(kept))

    def current(self, now: float, *, window_s: float) -> int | None:
        """The maximum held at ``now``, or ``None`` when nothing is held."""
        for recorded_s, value in self.entries:
            if now - recorded_s < window_s:
                return value
        return None

    def next_change_s(self, now: float, *, window_s: float) -> float | None:
        """Seconds from ``now`` until the current maximum expires, or ``None``."""
        for recorded_s, _ in self.entries:
            if now - recorded_s < window_s:
                return recorded_s + window_s - now
        return None
