"""The routes file (:mod:`activator.routing.routes_file`).

Covers: the architecture page's routes-file example parses exactly; each
routes-file mistake gets an error naming entry and key.
"""

from __future__ import annotations

import pytest

from activator.routing.routes_file import parse_routes

DOCUMENTED_EXAMPLE = """
targets:
  - name: default/llama          # namespace/name
    models: [llama-3-8b]         # optional, as are hosts and path_prefix
    hosts: [llama.example.com]
    path_prefix: /llama
    endpoints: ["127.0.0.1:8001", "127.0.0.1:8002"]
    container_concurrency: 0
    cold_start_timeout: 10m
    max_buffered: 1000
"""


def test_design_example_parses() -> None:
    specs = parse_routes(DOCUMENTED_EXAMPLE)
    found = specs["default/llama"]
    llama = found.spec
    assert llama.models == ("llama-3-8b",)
    assert llama.hosts == ("llama.example.com",)
    assert llama.path_prefix == "/llama"
    assert llama.cold_start_timeout_s == 600
    assert llama.max_buffered == 1000
    assert [e.key for e in found.endpoints] == ["127.0.0.1:8001", "127.0.0.1:8002"]
    assert not any(e.ready for e in found.endpoints)  # ready only once probed
    assert (llama.default_priority, llama.shed_at_zero) == (0, False)
    tuned = parse_routes("targets: [{name: a/b, default_priority: -5, shed_at_zero: true}]")
    assert (tuned["a/b"].spec.default_priority, tuned["a/b"].spec.shed_at_zero) == (-5, True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("targets: 3", "'targets' must be a list"),
        ("other: []", "one key, 'targets'"),
        ("targets: [{name: llama}]", r"targets\[0\].name: 'llama' is not a target name"),
        ("targets: [{name: a/b, endpoints: [nope]}]", r"targets\[0\] \(a/b\).endpoints: 'nope'"),
        ("targets: [{name: a/b, max_buffered: -1}]", "max_buffered must be 0..100000"),
        ("targets: [{name: a/b, cold_start_timeout: 2h}]", "cold_start_timeout must be 1s..1h"),
        ("targets: [{name: a/b, colour: red}]", r"unknown key\(s\) \['colour'\]"),
        ("targets: [{name: a/b, path_prefix: x}]", "path_prefix must start with '/'"),
        ("targets: [{name: a/b, hosts: [h]}, {name: a/c, hosts: [h]}]", "host 'h' is claimed"),
        ("targets: [{name: a/b}, {name: a/b}]", "listed twice"),
        ("targets: [{name: a/b, resend_unanswered: maybe}]", "resend_unanswered: expected true or"),
        ("targets: [{name: a/b, resend_unanswered: 1}]", "resend_unanswered: expected true or"),
        ("targets: [{name: a/b, shed_at_zero: 1}]", "shed_at_zero: expected true or false"),
        ("targets: [{name: a/b, default_priority: top}]", "default_priority: expected critical"),
        ("targets: [{name: a/b, default_priority: true}]", "default_priority: expected critical"),
    ],
)
def test_routes_file_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_routes(text)
