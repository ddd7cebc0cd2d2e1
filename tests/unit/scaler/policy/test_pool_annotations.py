"""An InferencePool target's annotations (scaler.policy.pool_annotations).

Covers: the Deployment's value wins key by key, the pool fills in the rest
and the merge says which keys are the pool's; the pool's routing keys, its
opt-in and its status are not lent; the picker's metrics URL defaults to
its Service on the router's metrics port (none without a Service), an
annotation overrides it, and a bad one is a problem naming the key; the
no-endpoint TTL defaults to the router's 60 s and says whether it was
given; the waiting room is too short only for a TTL under the cold start
(0: no limit).
"""

from __future__ import annotations

from scaler.policy.pool_annotations import merge, read_picker, waiting_room_too_short

A = "autoscaling.tidal.dev/"


def test_the_deployment_wins_key_by_key_and_the_pool_fills_in() -> None:
    pool = {
        A + "max-scale": "8",
        A + "slo-ttft": "2s",
        A + "enabled": "true",
        A + "status": "{}",
        "placement.tidal.dev/policy": "spot",
        "routing.tidal.dev/models": "llama",
        "team": "ml",
    }
    merged = merge(pool, {A + "max-scale": "4", "routing.tidal.dev/models": "own"})
    assert merged.annotations == {
        A + "max-scale": "4",
        A + "slo-ttft": "2s",
        "placement.tidal.dev/policy": "spot",
        "routing.tidal.dev/models": "own",
    }
    assert merged.from_pool == {A + "slo-ttft", "placement.tidal.dev/policy"}


def test_the_pickers_url_defaults_to_its_service_and_an_annotation_overrides_it() -> None:
    config, problems = read_picker({}, namespace="ml", picker=("llama-epp", 9002))
    assert config.metrics_url == "http://llama-epp.ml.svc:9090/metrics"
    assert (config.no_endpoint_ttl_s, config.ttl_said, problems) == (60.0, False, ())
    given = {A + "epp-metrics-url": "https://10.0.0.9:9443/metrics"}
    config, _ = read_picker(given, namespace="ml", picker=("llama-epp", 9002))
    assert config.metrics_url == "https://10.0.0.9:9443/metrics"
    config, _ = read_picker({}, namespace="ml", picker=None)
    assert config.metrics_url is None


def test_bad_picker_keys_are_problems_naming_the_key() -> None:
    bad = {A + "epp-metrics-url": "epp:9090/metrics", A + "epp-no-endpoint-request-ttl": "2d"}
    config, problems = read_picker(bad, namespace="ml", picker=("llama-epp", 9002))
    assert [p.key for p in problems] == [A + "epp-metrics-url", A + "epp-no-endpoint-request-ttl"]
    assert "an http or https URL" in str(problems[0])
    assert "0s to 24h" in str(problems[1])
    # The defaults stand meanwhile, so nothing reads a half-parsed value.
    assert (config.metrics_url, config.no_endpoint_ttl_s) == (
        "http://llama-epp.ml.svc:9090/metrics",
        60.0,
    )
    config, problems = read_picker(
        {A + "epp-no-endpoint-request-ttl": "10m"}, namespace="ml", picker=None
    )
    assert (config.no_endpoint_ttl_s, config.ttl_said, problems) == (600.0, True, ())


def test_the_waiting_room_is_too_short_only_under_the_cold_start() -> None:
    assert waiting_room_too_short(no_endpoint_ttl_s=60.0, cold_start_s=95.0)
    assert not waiting_room_too_short(no_endpoint_ttl_s=600.0, cold_start_s=95.0)
    assert not waiting_room_too_short(no_endpoint_ttl_s=0.0, cold_start_s=95.0)  # no limit
