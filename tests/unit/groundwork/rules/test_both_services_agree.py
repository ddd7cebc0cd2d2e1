"""Every routing and scaling key gets the same verdict from the activator and the scaler.

Covers, for each key of :data:`~groundwork.rules.routing_keys.ROUTING_KEYS`
and :data:`~groundwork.rules.scaling_keys.SCALING_KEYS` (a key without
cases here fails the test, so a new key comes with its cases):

- routing keys: each good value is accepted and each bad one refused by the
  activator's reader (:func:`activator.kube.translate.target_from_deployment`,
  which routes) and by the scaler's (:func:`scaler.policy.routing_check.routing_problems`,
  which raises the ``InvalidRouting`` Event), with the same key named;
- scaling keys: the scaler's reader (:func:`scaler.policy.parse_scaling_config`)
  accepts each good value and refuses each bad one naming the key; for the
  keys the activator acts on (``adapter-keep-alive``, ``slo-ttft``), the
  activator uses a good value and ignores a bad one; every other scaling key
  leaves the activator's target as it was (the scaler alone judges it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pytest

from activator.kube.translate import target_from_deployment
from groundwork.rules.routing_keys import ROUTING_KEYS, ROUTING_PREFIX
from groundwork.rules.scaling_keys import (
    ADAPTER_KEEP_ALIVE,
    AUTOSCALING_PREFIX,
    SCALING_KEYS,
    SLO_TTFT,
)
from scaler.policy import InvalidAnnotation, parse_scaling_config
from scaler.policy.routing_check import routing_problems

R = ROUTING_PREFIX
A = AUTOSCALING_PREFIX
P = "placement.tidal.dev/"

# key -> (good values, bad values); "0" and blanks where a grammar could differ.
ROUTING_CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    R + "service": (("llama-svc", " other ", ""), ()),
    R + "port": (("80", " 8000 ", "http", "65535"), ("0", "65536", "", "  ")),
    R + "hosts": (("a.example.com", "*.example.com, b", ""), ()),
    R + "path-prefix": (("/", "/llama", "/v1/models"), ("llama", " /llama", "")),
    R + "models": (("llama", "a, b ,c", ""), ()),
    R + "adapters": (
        ("sql=/models/sql", " sql=a, chat=org/chat ,"),
        ("sql", "sql=a, sql=b", "-sql=a", "sql=", "sql=a b", " , ", "base=org/x"),
    ),
    R + "adapters-configmap": (("many", " many "), ("Many", "", "a_b", "-x")),
    R + "cold-start-timeout": (
        ("1s", "90s", "10m", "1h", "0.5h", ".5m", "1m30s"),
        ("0", "0s", "500ms", "2h", "90", "5x", "-1m", "+1m", "1d", ""),
    ),
    R + "max-buffered": (
        ("0", "10", "+10", "-0", "100000", " 7 "),
        ("-1", "100001", "1.5", "1_000", "lots", "", "١٢"),
    ),
    R + "container-concurrency": (("0", "4", "10000"), ("-1", "10001", "abc", "1e3")),
    R + "balancing": (("least-loaded", "prefix", " prefix "), ("round-robin", "Prefix", "")),
    R + "resend-unanswered": (("true", "false", "False", " TRUE "), ("yes", "0", "")),
    R + "default-priority": (
        ("critical", "Standard", " sheddable ", "-40", "+3", "1000000", "-1000000"),
        ("urgent", "1000001", "1.5", "", "0x10"),
    ),
    R + "shed-at-zero": (("true", "false", "True"), ("yes", "1", "")),
}

# What a routing key needs beside it to be read as the cases mean.
_ROUTING_BESIDE = {R + "adapters": {R + "models": "base"}}
# The ConfigMaps the activator finds (a good name must find its ConfigMap).
_CONFIGMAPS = {"ml/many": {"data": {"a1": "org/a1"}}}

SCALING_CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    A + "min-scale": (("0", "3", "+10", "-0"), ("-1", "1.5", "abc", "11", "")),
    A + "max-scale": (("1", "10", "1000"), ("0", "1001", "ten")),
    A + "initial-scale": (("1", "10"), ("0", "11")),
    A + "engine": (("vllm", " triton ", "generic"), ("tgi", "VLLM", "")),
    A + "target-concurrency": (("0.5", "16", "1e3"), ("0", "-3", "nan", "inf", "lots")),
    A + "target-queue-depth": (("4", "0.1"), ("0", "-1")),
    A + "target-kv-cache-utilization": (("1", "70", "100"), ("0.5", "101", "70%")),
    A + "target-gpu-utilization": (("1", "85.5"), ("150", "0")),
    A + "window": (("6s", "90s", "1m30s", "1h"), ("5s", "2h", "60", "1d", "-60s", "0")),
    A + "panic-window-percentage": (("1", "100"), ("0", "101")),
    A + "panic-threshold-percentage": (("110", "1000"), ("100", "1001")),
    A + "scale-down-delay": (("0", "0s", "1h", "500ms"), ("2h", "-1s", "+1s", "1")),
    A + "max-scale-up-rate": (("1.5", "1000"), ("1", "0.5")),
    A + "max-scale-down-rate": (("10", "1.01"), ("1", "-2")),
    A + "scale-to-zero-grace-period": (
        ("0", "0s", "500ms", "24h", "adaptive", " adaptive "),
        ("25h", "soon", "adaptiv", "Adaptive"),
    ),
    A + "metrics-port": (("9090", "metrics", "http-2"), ("0", "70000", "Metrics", "a--b", "-x")),
    P + "policy": (("on-demand", "spot", "spot-with-on-demand-baseline"), ("cheap", "Spot")),
    P + "on-demand-baseline": (("0", "10"), ("-1", "11")),
    P + "fallback": (("dynamic", "none"), ("static", "")),
    P + "spot-overprovision": (("0", "2"), ("11", "x")),
    P + "pending-timeout": (("10s", "3m", "1h"), ("5s", "2h", "0")),
    A + "sleep-after": (("1s", "30s", "4m"), ("0", "500ms", "5m", "25h")),
    A + "sleep-level": (("1", "2"), ("0", "3", "one")),
    A + "slo-ttft": (("2s", "100ms", "10m"), ("50ms", "11m", "2", "0")),
    A + "slo-attainment": (("50", "99", "99.99"), ("49", "100", "x")),
    A + "slo-tpot": (("1ms", "50ms", "10s"), ("0", "30s", "0.5ms")),
    A + "adapter-keep-alive": (("1s", "10m", "24h"), ("0", "500ms", "2d", "25h", "x")),
}

# Keys valid only beside another one.
_SCALING_BESIDE = {
    A + "slo-attainment": {A + "slo-ttft": "2s"},
    A + "slo-tpot": {A + "slo-ttft": "2s"},
}


def test_every_key_has_cases() -> None:
    assert set(ROUTING_CASES) == {k.name for k in ROUTING_KEYS}
    assert set(SCALING_CASES) == {k.name for k in SCALING_KEYS}
    for good, _ in (*ROUTING_CASES.values(), *SCALING_CASES.values()):
        assert good, "each key has a good value"


def _cases(
    table: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]],
) -> list[object]:
    return [
        pytest.param(key, value, verdict, id=f"{key.rpartition('/')[2]}={value!r}:{verdict}")
        for key, (good, bad) in table.items()
        for verdict, values in (("good", good), ("bad", bad))
        for value in values
    ]


def _deployment(annotations: Mapping[str, str]) -> dict[str, object]:
    return {"metadata": {"namespace": "ml", "name": "llama", "annotations": dict(annotations)}}


_NAMED = re.compile(r"(routing\.tidal\.dev/[a-z-]+)")


@pytest.mark.parametrize(("key", "value", "verdict"), _cases(ROUTING_CASES))
def test_a_routing_value_gets_one_verdict(key: str, value: str, verdict: str) -> None:
    annotations = {**_ROUTING_BESIDE.get(key, {}), key: value}
    scaler_says = {p.key for p in routing_problems(annotations)}
    activator_says = {
        m.group(1)
        for problem in target_from_deployment(_deployment(annotations), _CONFIGMAPS).problems
        for m in [_NAMED.search(problem)]
        if m is not None
    }
    assert scaler_says == activator_says
    assert scaler_says == ({key} if verdict == "bad" else set())


def _scaler_refuses(annotations: Mapping[str, str]) -> tuple[str, ...]:
    try:
        parse_scaling_config(annotations)
    except InvalidAnnotation as error:
        return error.keys
    return ()


@pytest.mark.parametrize(("key", "value", "verdict"), _cases(SCALING_CASES))
def test_a_scaling_value_gets_one_verdict(key: str, value: str, verdict: str) -> None:
    beside = _SCALING_BESIDE.get(key, {})
    annotations = {**beside, key: value}
    assert _scaler_refuses(annotations) == ((key,) if verdict == "bad" else ())
    routing = target_from_deployment(_deployment(annotations))
    plain = target_from_deployment(_deployment(beside))
    assert routing.problems == plain.problems == ()  # the scaler raises the Event
    if key == ADAPTER_KEEP_ALIVE.name:
        used = routing.spec.adapter_keep_alive_s != plain.spec.adapter_keep_alive_s
        default = value.strip() == ADAPTER_KEEP_ALIVE.default
        assert used == (verdict == "good" and not default)
    elif key == SLO_TTFT.name:
        assert routing.spec.counts_tokens == (verdict == "good")
    else:
        assert routing == plain
