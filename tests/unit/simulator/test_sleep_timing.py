"""vLLM sleep mode's figures, shared by the fake vLLM and the simulator.

Covers: level 1 holds the weights in host memory and level 2 nothing; for
Llama-3.1-8B a level-2 wake (a reload) takes longer than a level-1 wake (a
host-to-device copy) and far less than a cold start of 30 s, the low end of
the 30-100 s vLLM's post measured; both grow with the weights; an unknown
level is refused.
"""

from __future__ import annotations

import pytest

from simulator.engine.sleep_timing import DEFAULT_WEIGHTS_MIB, host_memory_mib, wake_seconds

BOTH = ("weights", "kv_cache")


def test_host_memory_per_level() -> None:
    assert host_memory_mib(DEFAULT_WEIGHTS_MIB, 1) == DEFAULT_WEIGHTS_MIB
    assert host_memory_mib(DEFAULT_WEIGHTS_MIB, 2) == 0
    with pytest.raises(ValueError, match="sleep level must be 1 or 2; got 3"):
        host_memory_mib(DEFAULT_WEIGHTS_MIB, 3)


def test_level_two_sits_between_level_one_and_a_cold_start() -> None:
    level_1 = wake_seconds(DEFAULT_WEIGHTS_MIB, 1, BOTH)
    level_2 = wake_seconds(DEFAULT_WEIGHTS_MIB, 2, BOTH)
    assert (round(level_1, 2), round(level_2, 2)) == (0.9, 2.22)
    assert level_1 < level_2 < 30.0
    assert wake_seconds(2 * DEFAULT_WEIGHTS_MIB, 2, BOTH) > level_2
