"""The interval ticker on the loop's clock (looptime): the interval, no catch-up burst, pokes.

Covers: a tick at start and then every interval; a tick slower than the
interval is followed by one tick, not a burst of catch-up ticks; a poke
(winning the Lease, an interruption notice) brings a tick at once and the
interval starts again from it; a poke during a tick brings one more tick
right after it; a non-positive interval is refused with the value named.
"""

from __future__ import annotations

import asyncio

import pytest

from scaler.ticking import IntervalTicker

pytestmark = pytest.mark.looptime


async def _ticks(ticker: IntervalTicker, count: int, work_s: float = 0.0) -> list[float]:
    """The loop time of the first ``count`` ticks, each taking ``work_s``."""
    times: list[float] = []
    async for now in ticker:
        times.append(now)
        if len(times) == count:
            break
        await asyncio.sleep(work_s)
    return times


async def test_ticks_every_interval_from_the_start() -> None:
    start = asyncio.get_running_loop().time()
    times = await _ticks(IntervalTicker(2.0), 3)
    assert [t - start for t in times] == [0.0, 2.0, 4.0]


async def test_a_slow_tick_brings_no_burst_of_catch_up_ticks() -> None:
    start = asyncio.get_running_loop().time()
    times = await _ticks(IntervalTicker(2.0), 3, work_s=5.0)
    assert [t - start for t in times] == [0.0, 5.0, 10.0]


async def test_a_poke_ticks_at_once_and_restarts_the_interval() -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    ticker = IntervalTicker(2.0)
    loop.call_later(0.5, ticker.poke)
    times = await _ticks(ticker, 3)
    assert [t - start for t in times] == [0.0, 0.5, 2.5]


async def test_a_poke_during_a_tick_brings_one_more_tick_right_after() -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    ticker = IntervalTicker(2.0)
    loop.call_later(0.5, ticker.poke)
    times = await _ticks(ticker, 3, work_s=1.0)  # the first tick is still working at 0.5
    assert [t - start for t in times] == [0.0, 1.0, 3.0]


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="tick interval must be > 0 seconds, got 0"):
        IntervalTicker(0)
