"""The spot/on-demand split (docs/placement.md, SpotHedge).

Covers:
- a table of worked cases: on-demand policy, target 0, the baseline, spot
  not yet ready (dynamic fallback covers it, and gives it back as spot
  becomes ready), overprovision, ``fallback: none``, a baseline larger than
  the target, the ``spot`` policy (no baseline, fallback honoured);
- properties over random inputs: on-demand never exceeds the target; with
  dynamic fallback, ready spot plus on-demand always covers the target; the
  baseline part never depends on spot readiness; more ready spot never means
  more on-demand; never more than target + overprovision counted as
  serving; with ``fallback: none`` on-demand never exceeds the baseline;
- bad input.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaler.policy import PlacementConfig, Split, split

BASELINE = PlacementConfig(policy="spot-with-on-demand-baseline", on_demand_baseline=1)


@pytest.mark.parametrize(
    ("target", "placement", "ready_spot", "expected"),
    [
        pytest.param(5, PlacementConfig(), 0, Split(0, 5), id="on-demand: everything on demand"),
        pytest.param(0, BASELINE, 0, Split(0, 0), id="target 0: nothing at all"),
        pytest.param(5, BASELINE, 4, Split(4, 1), id="spot ready: baseline only"),
        pytest.param(5, BASELINE, 0, Split(4, 5, covering=4), id="no spot ready: covered"),
        pytest.param(5, BASELINE, 2, Split(4, 3, covering=2), id="part ready: part covered"),
        pytest.param(5, BASELINE, 9, Split(4, 1), id="more spot ready than asked"),
        pytest.param(
            5, replace(BASELINE, spot_overprovision=2), 6, Split(6, 1), id="overprovision"
        ),
        pytest.param(
            5,
            replace(BASELINE, spot_overprovision=2),
            3,
            Split(6, 4, covering=3),
            id="overprovision not ready: covered up to the target",
        ),
        pytest.param(
            5, replace(BASELINE, fallback="none"), 0, Split(4, 1), id="fallback none: baseline"
        ),
        pytest.param(
            1, replace(BASELINE, on_demand_baseline=3), 0, Split(0, 1), id="baseline above target"
        ),
        pytest.param(
            1,
            replace(BASELINE, on_demand_baseline=3, fallback="none"),
            0,
            Split(0, 1),
            id="baseline above target, no fallback",
        ),
        pytest.param(
            4, PlacementConfig(policy="spot"), 1, Split(4, 3, covering=3), id="spot: no baseline"
        ),
        pytest.param(
            4, PlacementConfig(policy="spot", fallback="none"), 1, Split(4, 0), id="spot only"
        ),
    ],
)
def test_split(target: int, placement: PlacementConfig, ready_spot: int, expected: Split) -> None:
    assert split(target=target, placement=placement, ready_spot=ready_spot) == expected


placements = st.builds(
    PlacementConfig,
    policy=st.sampled_from(["on-demand", "spot", "spot-with-on-demand-baseline"]),
    on_demand_baseline=st.integers(0, 20),
    fallback=st.sampled_from(["dynamic", "none"]),
    spot_overprovision=st.integers(0, 5),
)


@given(target=st.integers(0, 30), placement=placements, ready_spot=st.integers(0, 40))
def test_split_properties(target: int, placement: PlacementConfig, ready_spot: int) -> None:
    result = split(target=target, placement=placement, ready_spot=ready_spot)
    assert 0 <= result.on_demand <= target
    assert result.spot >= 0
    assert 0 <= result.covering <= result.on_demand
    if target == 0:
        assert result == Split(0, 0)
    if placement.fallback == "dynamic" or placement.policy == "on-demand":
        # Ready spot (up to what was asked) plus on-demand covers the target.
        assert min(ready_spot, result.spot) + result.on_demand >= target
    # Never more than target + overprovision counted as serving.
    assert min(ready_spot, result.spot) + result.on_demand <= target + placement.spot_overprovision
    if placement.fallback == "none" and placement.policy != "on-demand":
        baseline = 0 if placement.policy == "spot" else placement.on_demand_baseline
        assert result.on_demand <= baseline
    more_ready = split(target=target, placement=placement, ready_spot=ready_spot + 1)
    assert more_ready.on_demand <= result.on_demand
    assert more_ready.spot == result.spot  # readiness never changes what spot is asked for


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"target": -1}, "target must be >= 0", id="negative target"),
        pytest.param({"ready_spot": -1}, "ready_spot must be >= 0", id="negative ready"),
        pytest.param(
            {"placement": PlacementConfig(policy="cheap")}, "unknown placement policy", id="policy"
        ),
        pytest.param(
            {"placement": replace(BASELINE, fallback="static")}, "unknown fallback", id="fallback"
        ),
    ],
)
def test_split_bad_input(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"target": 3, "placement": BASELINE, "ready_spot": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        split(**args)  # type: ignore[arg-type]
