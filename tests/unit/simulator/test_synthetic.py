"""Synthetic workloads (simulator.synthetic) have the statistics they claim.

Covers: Gamma bursts at the asked mean rate with a coefficient of variation
near 1/sqrt(shape); a diurnal day whose busiest stretch is several times its
quietest; a real day at the production mean peaks at noon 10x its
midnight trough, and a week's weekend days run at their share of a
weekday; a stream yields, one at a time, what the list holds; many
models whose per-model request counts follow the Azure Functions shares
(most rare, a few busy), each request naming its model; runs are
reproducible by seed; bad specs are refused by name.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pytest

from simulator.synthetic import (
    DAY_S,
    PRODUCTION_DAY_PER_MIN,
    WEEKEND_SHARE,
    SyntheticSpec,
    generate,
    stream,
)


def test_gamma_bursts_rate_and_burstiness() -> None:
    records = generate(SyntheticSpec(kind="bursts", duration_s=3600, requests_per_min=154, seed=3))
    assert 154 * 60 * 0.8 <= len(records) <= 154 * 60 * 1.2
    gaps = [b.offset_s - a.offset_s for a, b in itertools.pairwise(records)]
    cv = statistics.pstdev(gaps) / statistics.mean(gaps)
    assert 1.4 <= cv <= 2.3  # 1 / sqrt(0.3) = 1.83
    assert all(r.prompt_tokens >= 1 and r.output_tokens >= 1 for r in records)


def test_diurnal_peak_is_several_times_the_trough() -> None:
    records = generate(
        SyntheticSpec(kind="diurnal", duration_s=2400, day_s=2400, requests_per_min=300, seed=4)
    )
    tenths = Counter(min(9, int(r.offset_s / 240)) for r in records)
    counts = [tenths[i] for i in range(10)]
    # Trough at the start and the end of the day, peak in the middle.
    assert max(counts[4:6]) >= 4 * min(counts[0], counts[9])


def test_a_real_day_peaks_at_noon_ten_times_its_midnight_trough() -> None:
    # A tenth of the production rate keeps the draw quick; the shape is the rate's.
    spec = SyntheticSpec(kind="diurnal", duration_s=DAY_S, requests_per_min=PRODUCTION_DAY_PER_MIN)
    hours = Counter(int(r.offset_s // 3600) for r in generate(replace(spec, requests_per_min=60)))
    assert hours[12] / ((hours[0] + hours[23]) / 2) == pytest.approx(10 * 0.97, rel=0.3)
    assert sum(hours.values()) == pytest.approx(60 * 1440, rel=0.03)


def test_a_week_has_quieter_weekends_and_the_asked_mean() -> None:
    spec = SyntheticSpec(kind="week", duration_s=7 * DAY_S, requests_per_min=20, seed=2)
    days = Counter(int(r.offset_s // DAY_S) for r in generate(spec))
    weekday = statistics.mean(days[d] for d in range(5))
    weekend = statistics.mean(days[d] for d in (5, 6))
    assert weekend / weekday == pytest.approx(WEEKEND_SHARE, rel=0.1)
    assert sum(days.values()) == pytest.approx(20 * 1440 * 7, rel=0.03)


def test_a_stream_draws_what_the_list_holds_one_request_at_a_time() -> None:
    spec = SyntheticSpec(kind="week", duration_s=7 * DAY_S, requests_per_min=2, seed=3)
    requests = stream(spec)
    assert isinstance(requests, Iterator)
    assert list(requests) == generate(spec)


def test_many_models_are_mostly_rare() -> None:
    records = generate(SyntheticSpec(kind="many-models", duration_s=3600, models=200, seed=5))
    per_model = Counter(r.model for r in records)
    assert all(r.model.startswith("model-") for r in records)
    # 45 % are invoked at most about once an hour: many models see 0 to 2 requests.
    rare = sum(1 for i in range(200) if per_model.get(f"model-{i:03d}", 0) <= 2)
    assert 0.3 * 200 <= rare <= 0.65 * 200
    assert max(per_model.values()) >= 60  # and a few are busy


def test_same_seed_same_workload() -> None:
    spec = SyntheticSpec(kind="bursts", duration_s=300, seed=9)
    assert generate(spec) == generate(spec)
    assert generate(spec) != generate(SyntheticSpec(kind="bursts", duration_s=300, seed=10))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"kind": "waves"}, "unknown synthetic workload", id="kind"),
        pytest.param({"duration_s": 0}, "duration", id="duration"),
        pytest.param({"gamma_shape": 0}, "Gamma shape", id="shape"),
        pytest.param({"tokens": "poems"}, "token profile", id="tokens"),
        pytest.param({"models": 0}, "at least one model", id="models"),
    ],
)
def test_bad_specs_are_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SyntheticSpec(**kwargs)  # type: ignore[arg-type]
