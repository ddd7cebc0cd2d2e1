"""Windows: trailing averages in ring buffers, the per-target SignalWindows, and MaxHold.

Covers:
- edge cases as a table: empty windows read ``None``; samples leave the
  stable and the panic window exactly when their bucket leaves; several
  samples in one bucket; a late sample lands in its own bucket and one older
  than the window is dropped; reading at an earlier time than the newest
  sample; a silence longer than the window empties it; a second without a
  sample is missing data, not zero;
- against a brute-force model (hypothesis): random samples and reads, with
  1-second buckets and with the wider buckets of long windows;
- exact running sums: adding and ageing out 0.1 a million times... (well,
  ten thousand) leaves exactly zero, not a residue that reads as load;
- bucket width: 1 s up to 600 s windows, wider beyond, never more than
  MAX_BUCKETS buckets;
- bad input: NaN, negative and infinite samples, bad window lengths;
- SignalWindows: freshness boundary, unrecorded kinds, resizing on a changed
  window keeps the data, ``readings`` for a config, ``latest`` and ``forget``;
- MaxHold: holds the maximum for exactly the window, drops dominated
  entries, and reports when the maximum changes next.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.policy import MaxHold, SignalKind, SignalReading, SignalWindows, TrailingAverages
from scaler.policy.windows import MAX_BUCKETS
from simulator.harness import config

C = SignalKind.CONCURRENCY


def averages_after(
    samples: list[tuple[float, float]], now: float, *, stable_s: float = 10, panic_s: float = 3
) -> tuple[float | None, float | None]:
    window = TrailingAverages(stable_window_s=stable_s, panic_window_s=panic_s)
    for at_s, value in samples:
        window.record(value, at_s)
    return window.averages(now)


@pytest.mark.parametrize(
    ("samples", "now", "expected"),
    [
        pytest.param([], 5.0, (None, None), id="empty"),
        pytest.param([(5.2, 4.0)], 5.9, (4.0, 4.0), id="one sample"),
        pytest.param([(5.2, 4.0), (5.7, 8.0)], 5.9, (6.0, 6.0), id="two in one bucket"),
        pytest.param(
            [(1.0, 10.0), (8.0, 2.0)], 9.0, (6.0, 2.0), id="panic holds only the newest 3 s"
        ),
        pytest.param([(5.5, 4.0)], 7.99, (4.0, 4.0), id="still in panic window: buckets 5..7"),
        pytest.param([(5.5, 4.0)], 8.0, (4.0, None), id="leaves the panic window at bucket 8"),
        pytest.param([(5.5, 4.0)], 14.99, (4.0, None), id="still in stable window: buckets 5..14"),
        pytest.param([(5.5, 4.0)], 15.0, (None, None), id="leaves the stable window at bucket 15"),
        pytest.param(
            [(0.0, 1.0), (1.0, 3.0), (100.0, 5.0)], 100.0, (5.0, 5.0), id="long silence clears"
        ),
        pytest.param(
            [(1.0, 8.0), (9.0, 0.0)], 9.0, (4.0, 0.0), id="a second without a sample is not zero"
        ),
        pytest.param([(9.0, 8.0), (4.0, 2.0)], 9.0, (5.0, 8.0), id="late sample in its bucket"),
        pytest.param([(20.0, 8.0), (4.0, 2.0)], 20.0, (8.0, 8.0), id="too-late sample dropped"),
        pytest.param(
            [(5.0, 2.0), (9.0, 6.0)], 7.0, (4.0, 6.0), id="read before the newest: as of newest"
        ),
    ],
)
def test_trailing_averages_edges(
    samples: list[tuple[float, float]],
    now: float,
    expected: tuple[float | None, float | None],
) -> None:
    assert averages_after(samples, now) == expected


def _reference(
    samples: list[tuple[float, float]], now: float, *, width: int, n: int, panic_n: int
) -> tuple[float | None, float | None]:
    head = math.floor(now / width)

    def mean(lowest_bucket: int) -> float | None:
        values = [v for t, v in samples if math.floor(t / width) >= lowest_bucket]
        return sum(values) / len(values) if values else None

    return mean(head - n + 1), mean(head - panic_n + 1)


@given(
    events=st.lists(
        st.tuples(
            st.floats(0, 40, allow_nan=False),  # time step to this event
            st.none() | st.floats(0, 1000, allow_nan=False),  # None: a read
        ),
        max_size=60,
    ),
    windows=st.sampled_from([(10.0, 3.0), (6.0, 6.0), (60.0, 6.0), (1800.0, 180.0), (4.5, 1.0)]),
)
@settings(max_examples=200, deadline=None)
def test_trailing_averages_match_brute_force(
    events: list[tuple[float, float | None]], windows: tuple[float, float]
) -> None:
    stable_s, panic_s = windows
    window = TrailingAverages(stable_window_s=stable_s, panic_window_s=panic_s)
    width = window.width_s
    n = math.ceil(stable_s / width)
    panic_n = math.ceil(panic_s / width)
    samples: list[tuple[float, float]] = []
    now = 0.0
    for step, value in events:
        now += step
        if value is None:
            got = window.averages(now)
            want = _reference(samples, now, width=width, n=n, panic_n=panic_n)
            for g, w in zip(got, want, strict=True):
                assert (g is None) == (w is None), (got, want)
                if g is not None and w is not None:
                    assert g == pytest.approx(w, abs=1e-6)
        else:
            window.record(value, now)
            samples.append((now, value))


def test_running_sums_are_exact() -> None:
    window = TrailingAverages(stable_window_s=6, panic_window_s=2)
    for t in range(10_000):
        window.record(0.1 if t < 9_000 else 0.0, float(t))
    # The last 0.1 left the window long ago: the average is exactly zero.
    assert window.averages(9_999.0) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("stable_s", "width_s"),
    [
        pytest.param(6, 1, id="6 s: 1 s buckets"),
        pytest.param(600, 1, id="10 min: 1 s buckets"),
        pytest.param(601, 2, id="just over: 2 s buckets"),
        pytest.param(3600, 6, id="1 h: 6 s buckets"),
    ],
)
def test_bucket_width(stable_s: float, width_s: int) -> None:
    window = TrailingAverages(stable_window_s=stable_s, panic_window_s=1)
    assert window.width_s == width_s
    assert math.ceil(stable_s / width_s) <= MAX_BUCKETS


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.5])
def test_bad_samples_are_refused(value: float) -> None:
    window = TrailingAverages(stable_window_s=6, panic_window_s=1)
    with pytest.raises(ValueError, match="finite number >= 0"):
        window.record(value, 1.0)
    assert window.averages(1.0) == (None, None)


@pytest.mark.parametrize(
    ("stable_s", "panic_s", "match"),
    [
        pytest.param(0, 1, "stable_window_s must be > 0", id="zero stable"),
        pytest.param(math.inf, 1, "stable_window_s", id="infinite stable"),
        pytest.param(6, 0, "panic_window_s", id="zero panic"),
        pytest.param(6, 7, "panic_window_s", id="panic longer than stable"),
    ],
)
def test_bad_window_lengths(stable_s: float, panic_s: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TrailingAverages(stable_window_s=stable_s, panic_window_s=panic_s)
    with pytest.raises(ValueError, match=match):
        SignalWindows(stable_window_s=stable_s, panic_window_s=panic_s)


def _read(windows: SignalWindows, now: float, *, fresh_within_s: float = 3.0) -> SignalReading:
    return windows.reading(
        C, now, stable_window_s=60, panic_window_s=6, fresh_within_s=fresh_within_s
    )


def test_signal_windows_freshness() -> None:
    windows = SignalWindows()
    assert _read(windows, 10.0) == SignalReading(stable=None, panic=None, fresh=False)
    windows.record(C, 5.0, 10.0)
    assert _read(windows, 13.0) == SignalReading(stable=5.0, panic=5.0, fresh=True)
    assert _read(windows, 13.01).fresh is False  # stale, but the window still remembers
    assert _read(windows, 13.01).stable == 5.0


def test_signal_windows_keep_kinds_apart() -> None:
    windows = SignalWindows()
    windows.record(C, 5.0, 1.0)
    windows.record(SignalKind.QUEUE_DEPTH, 1.0, 1.0)
    assert _read(windows, 1.0).stable == 5.0
    assert windows.latest(SignalKind.QUEUE_DEPTH) == (1.0, 1.0)
    assert windows.latest(SignalKind.GPU_UTILIZATION) is None
    windows.forget(SignalKind.QUEUE_DEPTH)
    assert windows.latest(SignalKind.QUEUE_DEPTH) is None


def test_signal_windows_resize_keeps_data() -> None:
    windows = SignalWindows(stable_window_s=60, panic_window_s=6)
    for t in range(100):
        windows.record(C, float(t), float(t))
    # A longer window (the annotation changed to 1 h): the 60 s kept so far stay.
    longer = windows.reading(C, 99.0, stable_window_s=3600, panic_window_s=360, fresh_within_s=3)
    assert windows.stable_window_s == 3600
    assert longer.stable == pytest.approx(sum(range(40, 100)) / 60)
    assert longer.fresh
    # Back to a short window: the newest 10 s.
    shorter = windows.reading(C, 99.0, stable_window_s=10, panic_window_s=1, fresh_within_s=3)
    assert shorter.stable is not None
    assert 85 <= shorter.stable <= 99  # 6 s buckets moved to their start times


def test_signal_windows_readings_for_config() -> None:
    cfg = config(target_queue_depth=2.0, window_s=30.0)
    windows = SignalWindows.for_config(cfg)
    assert (windows.stable_window_s, windows.panic_window_s) == (30.0, 3.0)
    windows.record(C, 4.0, 1.0)
    readings = windows.readings(cfg, 2.0, fresh_within_s=3.0)
    assert readings == {
        C: SignalReading(stable=4.0, panic=4.0, fresh=True),
        SignalKind.QUEUE_DEPTH: SignalReading(stable=None, panic=None, fresh=False),
    }


def test_max_hold() -> None:
    hold = MaxHold()
    assert hold.current(0.0, window_s=10) is None
    hold = hold.record(3, 0.0, window_s=10).record(5, 2.0, window_s=10).record(4, 4.0, window_s=10)
    # 3 is dominated by the later 5 and dropped at once.
    assert hold.entries == ((2.0, 5), (4.0, 4))
    assert hold.current(11.99, window_s=10) == 5
    assert hold.next_change_s(6.0, window_s=10) == 6.0
    assert hold.current(12.0, window_s=10) == 4  # 5 expires exactly 10 s after it was recorded
    assert hold.current(14.0, window_s=10) is None
    assert hold.next_change_s(14.0, window_s=10) is None
    # Recording drops what expired.
    assert hold.record(1, 13.0, window_s=10).entries == ((4.0, 4), (13.0, 1))


def test_memory_is_bounded_for_long_windows() -> None:
    window = TrailingAverages(stable_window_s=3600, panic_window_s=360)
    # Two flat columns of at most MAX_BUCKETS entries, however long the window.
    assert len(window._sums) == len(window._counts) == MAX_BUCKETS
