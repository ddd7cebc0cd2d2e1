"""Annotation parsing (docs/annotations.md): every key, good and bad values, and the error messages.

Covers:
- no annotations gives the documented defaults; routing keys, the status
  annotation, the enabled key and Tidal's on-demand pin record are left alone;
- each key: good values (edges of each range included) parsed into the
  config, with percentages turned into fractions and durations into seconds;
- each key: bad values (out of range, wrong type, wrong unit) rejected
  with a message naming the key, the value and what is allowed (the spot
  placement policies are accepted: issue 11);
- cross-field checks against max-scale (min, initial, baseline,
  overprovision), and none against a max-scale that is itself bad;
- the KV-cache target needs engine vllm;
- unknown keys under our prefixes are typos: named with the closest known
  key and ignored, the config built from the known ones;
- every problem is reported at once, not just the first;
- Go-style durations.
"""

from __future__ import annotations

import pytest

from groundwork.rules.durations import parse_duration_s
from scaler.policy import InvalidAnnotation, PlacementConfig, ScalingConfig, parse_scaling_config
from scaler.policy.annotations import KNOWN_KEYS, unknown_keys

A = "autoscaling.tidal.dev/"
P = "placement.tidal.dev/"


def test_defaults() -> None:
    assert parse_scaling_config({}) == ScalingConfig()
    assert parse_scaling_config({}).placement == PlacementConfig()


def test_keys_left_alone() -> None:
    annotations = {
        A + "status": '{"desired": 3}',
        A + "enabled": "true",
        P + "on-demand-pin": '{"key": "karpenter.sh/capacity-type"}',
        "routing.tidal.dev/hosts": "*.example.com",
        "routing.tidal.dev/whatever": "not ours to judge",
        "deployment.kubernetes.io/revision": "4",
    }
    assert parse_scaling_config(annotations) == ScalingConfig()


GOOD = [
    (A + "min-scale", "0", "min_scale", 0),
    (A + "min-scale", "10", "min_scale", 10),
    (A + "min-scale", " 3 ", "min_scale", 3),
    (A + "max-scale", "1", "max_scale", 1),
    (A + "max-scale", "1000", "max_scale", 1000),
    (A + "initial-scale", "1", "initial_scale", 1),
    (A + "initial-scale", "10", "initial_scale", 10),
    (A + "engine", "vllm", "engine", "vllm"),
    (A + "engine", "triton", "engine", "triton"),
    (A + "engine", "generic", "engine", "generic"),
    (A + "target-concurrency", "0.5", "target_concurrency", 0.5),
    (A + "target-concurrency", "64", "target_concurrency", 64.0),
    (A + "target-queue-depth", "4", "target_queue_depth", 4.0),
    (A + "target-kv-cache-utilization", "1", "target_kv_cache_utilization", 0.01),
    (A + "target-kv-cache-utilization", "70", "target_kv_cache_utilization", 0.7),
    (A + "target-kv-cache-utilization", "100", "target_kv_cache_utilization", 1.0),
    (A + "target-gpu-utilization", "85.5", "target_gpu_utilization", 0.855),
    (A + "window", "6s", "window_s", 6.0),
    (A + "window", "90s", "window_s", 90.0),
    (A + "window", "1m30s", "window_s", 90.0),
    (A + "window", "1h", "window_s", 3600.0),
    (A + "panic-window-percentage", "1", "panic_window_percentage", 1.0),
    (A + "panic-window-percentage", "100", "panic_window_percentage", 100.0),
    (A + "panic-threshold-percentage", "110", "panic_threshold_percentage", 110.0),
    (A + "panic-threshold-percentage", "1000", "panic_threshold_percentage", 1000.0),
    (A + "scale-down-delay", "0", "scale_down_delay_s", 0.0),
    (A + "scale-down-delay", "0s", "scale_down_delay_s", 0.0),
    (A + "scale-down-delay", "1h", "scale_down_delay_s", 3600.0),
    (A + "max-scale-up-rate", "1.5", "max_scale_up_rate", 1.5),
    (A + "max-scale-down-rate", "10", "max_scale_down_rate", 10.0),
    (A + "scale-to-zero-grace-period", "0s", "scale_to_zero_grace_s", 0.0),
    (A + "scale-to-zero-grace-period", "500ms", "scale_to_zero_grace_s", 0.5),
    (A + "scale-to-zero-grace-period", "24h", "scale_to_zero_grace_s", 86400.0),
    (A + "metrics-port", "9090", "metrics_port", 9090),
    (A + "metrics-port", "metrics", "metrics_port", "metrics"),
    (A + "metrics-port", "http-2", "metrics_port", "http-2"),
    (P + "policy", "on-demand", "placement.policy", "on-demand"),
    (P + "policy", "spot", "placement.policy", "spot"),
    (
        P + "policy",
        " spot-with-on-demand-baseline ",
        "placement.policy",
        "spot-with-on-demand-baseline",
    ),
    (P + "on-demand-baseline", "0", "placement.on_demand_baseline", 0),
    (P + "on-demand-baseline", "10", "placement.on_demand_baseline", 10),
    (P + "fallback", "none", "placement.fallback", "none"),
    (P + "spot-overprovision", "2", "placement.spot_overprovision", 2),
    (P + "pending-timeout", "10s", "placement.pending_timeout_s", 10.0),
    (P + "pending-timeout", "1h", "placement.pending_timeout_s", 3600.0),
    (A + "slo-ttft", "2s", "slo_ttft_s", 2.0),
    (A + "slo-ttft", "100ms", "slo_ttft_s", 0.1),
    (A + "slo-ttft", "10m", "slo_ttft_s", 600.0),
]


@pytest.mark.parametrize(
    ("key", "value", "attribute", "expected"),
    [pytest.param(*row, id=f"{row[0].split('/')[1]}={row[1].strip()}") for row in GOOD],
)
def test_good_value(key: str, value: str, attribute: str, expected: object) -> None:
    parsed: object = parse_scaling_config({key: value})
    for part in attribute.split("."):
        parsed = getattr(parsed, part)
    assert parsed == expected
    assert type(parsed) is type(expected)


def test_panic_window_follows_window_and_percentage() -> None:
    config = parse_scaling_config({A + "window": "2m", A + "panic-window-percentage": "25"})
    assert config.panic_window_s == 30.0
    tiny = parse_scaling_config({A + "window": "6s", A + "panic-window-percentage": "1"})
    assert tiny.panic_window_s == 1.0  # at least one second


BAD = [
    (A + "min-scale", "-1", "an integer from 0 to max-scale (10)"),
    (A + "min-scale", "1.5", "an integer from 0 to max-scale (10)"),
    (A + "min-scale", "abc", "an integer from 0 to max-scale (10)"),
    (A + "min-scale", "11", "an integer from 0 to max-scale (10)"),
    (A + "max-scale", "0", "an integer from 1 to 1000"),
    (A + "max-scale", "1001", "an integer from 1 to 1000"),
    (A + "max-scale", "ten", "an integer from 1 to 1000"),
    (A + "initial-scale", "0", "an integer from 1 to max-scale (10)"),
    (A + "initial-scale", "11", "an integer from 1 to max-scale (10)"),
    (A + "engine", "tgi", "one of vllm, triton, generic"),
    (A + "engine", "VLLM", "one of vllm, triton, generic"),
    (A + "target-concurrency", "0", "a number > 0"),
    (A + "target-concurrency", "-3", "a number > 0"),
    (A + "target-concurrency", "nan", "a number > 0"),
    (A + "target-concurrency", "inf", "a number > 0"),
    (A + "target-concurrency", "lots", "a number > 0"),
    (A + "target-queue-depth", "0", "a number > 0"),
    (A + "target-kv-cache-utilization", "0.5", "a percentage from 1 to 100"),
    (A + "target-kv-cache-utilization", "101", "a percentage from 1 to 100"),
    (A + "target-kv-cache-utilization", "70%", "a percentage from 1 to 100"),
    (A + "target-gpu-utilization", "150", "a percentage from 1 to 100"),
    (A + "window", "5s", "a duration from 6s to 1h"),
    (A + "window", "2h", "a duration from 6s to 1h"),
    (A + "window", "60", "a duration from 6s to 1h"),
    (A + "window", "1d", "a duration from 6s to 1h"),
    (A + "window", "-60s", "a duration from 6s to 1h"),
    (A + "panic-window-percentage", "0", "a percentage from 1 to 100"),
    (A + "panic-window-percentage", "101", "a percentage from 1 to 100"),
    (A + "panic-threshold-percentage", "100", "a percentage from 110 to 1000"),
    (A + "panic-threshold-percentage", "1001", "a percentage from 110 to 1000"),
    (A + "scale-down-delay", "2h", "a duration from 0s to 1h"),
    (A + "scale-down-delay", "-1s", "a duration from 0s to 1h"),
    (A + "max-scale-up-rate", "1", "a number > 1"),
    (A + "max-scale-up-rate", "0.5", "a number > 1"),
    (A + "max-scale-down-rate", "1", "a number > 1"),
    (A + "scale-to-zero-grace-period", "25h", "a duration from 0s to 24h"),
    (A + "scale-to-zero-grace-period", "soon", "a duration from 0s to 24h"),
    (A + "metrics-port", "0", "a port number from 1 to 65535 or a port name"),
    (A + "metrics-port", "70000", "a port number from 1 to 65535 or a port name"),
    (A + "metrics-port", "Metrics", "a port number from 1 to 65535 or a port name"),
    (A + "metrics-port", "much-too-long-name", "a port number from 1 to 65535"),
    (A + "metrics-port", "a--b", "a port number from 1 to 65535"),
    (A + "metrics-port", "-x", "a port number from 1 to 65535"),
    (A + "metrics-port", "1234-", "a port number from 1 to 65535"),
    (P + "policy", "cheap", "one of on-demand, spot, spot-with-on-demand-baseline"),
    (P + "on-demand-baseline", "-1", "an integer from 0 to max-scale (10)"),
    (P + "on-demand-baseline", "11", "an integer from 0 to max-scale (10)"),
    (P + "fallback", "static", "one of dynamic, none"),
    (P + "spot-overprovision", "11", "an integer from 0 to max-scale (10)"),
    (P + "pending-timeout", "5s", "a duration from 10s to 1h"),
    (P + "pending-timeout", "2h", "a duration from 10s to 1h"),
    (A + "slo-ttft", "50ms", "a duration from 100ms to 10m"),
    (A + "slo-ttft", "11m", "a duration from 100ms to 10m"),
    (A + "slo-ttft", "2", "a duration from 100ms to 10m"),
]


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [pytest.param(*row, id=f"{row[0].split('/')[1]}={row[1]}") for row in BAD],
)
def test_bad_value(key: str, value: str, allowed: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_scaling_config({key: value})
    error = caught.value
    assert error.keys == (key,)
    assert (error.key, error.value) == (key, value)
    assert allowed in error.allowed
    message = str(error)
    assert message.startswith(f'{key}: "{value}" is not allowed; allowed: ')
    assert allowed in message


def test_adaptive_grace_period_is_accepted_with_the_fixed_fallback() -> None:
    config = parse_scaling_config({A + "scale-to-zero-grace-period": " adaptive "})
    assert config.scale_to_zero_grace_adaptive
    assert config.scale_to_zero_grace_s == 300.0
    fixed = parse_scaling_config({A + "scale-to-zero-grace-period": "90s"})
    assert not fixed.scale_to_zero_grace_adaptive
    assert fixed.scale_to_zero_grace_s == 90.0
    with pytest.raises(InvalidAnnotation, match="or adaptive"):
        parse_scaling_config({A + "scale-to-zero-grace-period": "adaptiv"})


@pytest.mark.parametrize(
    ("annotations", "bad_keys", "fragment"),
    [
        pytest.param(
            {A + "min-scale": "5", A + "max-scale": "3"},
            (A + "min-scale",),
            "max-scale (3)",
            id="min above max",
        ),
        pytest.param(
            {A + "initial-scale": "4", A + "max-scale": "3"},
            (A + "initial-scale",),
            "max-scale (3)",
            id="initial above max",
        ),
        pytest.param(
            {P + "on-demand-baseline": "4", A + "max-scale": "3"},
            (P + "on-demand-baseline",),
            "max-scale (3)",
            id="baseline above max",
        ),
        pytest.param(
            {A + "max-scale": "zero", A + "min-scale": "20"},
            (A + "max-scale",),
            "an integer from 1 to 1000",
            id="no cross-check against a bad max",
        ),
        pytest.param(
            {A + "engine": "triton", A + "target-kv-cache-utilization": "70"},
            (A + "target-kv-cache-utilization",),
            "only with autoscaling.tidal.dev/engine vllm",
            id="KV cache needs vLLM",
        ),
        pytest.param(
            {A + "slo-attainment": "99"},
            (A + "slo-attainment",),
            "only with autoscaling.tidal.dev/slo-ttft",
            id="an attainment needs an objective",
        ),
        pytest.param(
            {A + "slo-ttft": "2s", A + "slo-attainment": "100"},
            (A + "slo-attainment",),
            "a percentage from 50 to 99.99",
            id="an attainment of 100 % cannot be sized for",
        ),
        pytest.param(
            {A + "slo-tpot": "50ms"},
            (A + "slo-tpot",),
            "only with autoscaling.tidal.dev/slo-ttft",
            id="an inter-token objective needs a TTFT objective",
        ),
        pytest.param(
            {A + "slo-ttft": "2s", A + "slo-tpot": "30s"},
            (A + "slo-tpot",),
            "a duration from 1ms to 10s",
            id="an inter-token objective past 10s",
        ),
    ],
)
def test_cross_field(annotations: dict[str, str], bad_keys: tuple[str, ...], fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_scaling_config(annotations)
    assert caught.value.keys == bad_keys
    assert fragment in str(caught.value)


def test_every_problem_is_reported() -> None:
    annotations = {
        A + "min-scale": "x",
        A + "window": "5",
        A + "scale-to-zero-grace-period": "forever",
        P + "policy": "cheap",
        A + "engine": "vllm",  # good: not reported
    }
    with pytest.raises(InvalidAnnotation) as caught:
        parse_scaling_config(annotations)
    error = caught.value
    assert sorted(error.keys) == sorted(k for k in annotations if k != A + "engine")
    message = str(error)
    for key in error.keys:
        assert key in message
    assert message.count("; allowed: ") == 4


@pytest.mark.parametrize(
    ("key", "closest"),
    [
        (A + "max-scal", A + "max-scale"),
        (A + "min-scael", A + "min-scale"),
        (P + "baseline", P + "on-demand-baseline"),
        (A + "targt-concurrency", A + "target-concurrency"),
    ],
)
def test_an_unknown_key_warns_with_the_closest_and_is_ignored(key: str, closest: str) -> None:
    annotations = {key: "3", A + "min-scale": "1"}
    assert parse_scaling_config(annotations) == ScalingConfig(min_scale=1)
    (problem,) = unknown_keys(annotations)
    text = str(problem)
    assert text.startswith(f'{key}: "3" is not a known key, ignored (did you mean {closest}?)')
    assert text.endswith("every key: docs/annotations.md")


def test_unknown_keys_without_a_close_one_and_many_fit_an_event() -> None:
    (problem,) = unknown_keys({A + "colour": "red"})
    assert "did you mean" not in str(problem)
    many = {A + f"max-scal{i}": "3" for i in range(5)}
    message = "; ".join(str(p) for p in unknown_keys(many))
    assert len(message.encode()) < 1024


def test_known_keys_cover_the_documented_table() -> None:
    # The scaling table and the two InferencePool keys (docs/annotations.md).
    assert len(KNOWN_KEYS) == len(set(KNOWN_KEYS)) == 27 + 2
    for key in KNOWN_KEYS:
        assert key.startswith((A, P))


def test_single_problem_constructor() -> None:
    error = InvalidAnnotation(A + "window", "5", "a duration")
    assert str(error) == 'autoscaling.tidal.dev/window: "5" is not allowed; allowed: a duration'
    assert isinstance(error, ValueError)
    with pytest.raises(ValueError, match="at least one problem"):
        InvalidAnnotation.from_problems(())


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("0", 0.0, id="bare zero"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("5m", 300.0, id="minutes"),
        pytest.param("1h", 3600.0, id="hours"),
        pytest.param("1h30m", 5400.0, id="compound"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("250us", 0.00025, id="microseconds"),
        pytest.param("2h0m0s", 7200.0, id="Go's own formatting"),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "90", "1d", "-5s", "5 m", "m", "1h-30m", "1.2.3s", "s5"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration_s(text)


def test_slo_attainment_is_a_fraction_beside_its_objective() -> None:
    config = parse_scaling_config({A + "slo-ttft": "2s", A + "slo-attainment": "99.5"})
    assert (config.slo_ttft_s, config.slo_attainment) == (2.0, pytest.approx(0.995))
    assert parse_scaling_config({}).slo_ttft_s is None
