"""The scaler's check of ``routing.tidal.dev/*``: what it reports and how.

Covers: a misspelt key is named with the closest known key and a pointer to
the reference page; bad values name key, value and what is allowed; other
prefixes are not this check's business; a Deployment without routing keys
has nothing to report. That both services find the same keys bad, for
every key, is tests/unit/groundwork/rules/test_both_services_agree.py.
"""

from __future__ import annotations

from scaler.policy.routing_check import routing_problems

R = "routing.tidal.dev/"


def test_a_misspelt_key_is_named_with_the_known_ones() -> None:
    (problem,) = routing_problems({R + "model": "llama", "autoscaling.tidal.dev/window": "x"})
    assert problem.key == R + "model"
    text = str(problem)
    assert 'routing.tidal.dev/model: "llama" is not a known key, ignored' in text
    assert f"did you mean {R}models?" in text and "docs/annotations.md" in text


def test_a_bad_value_names_the_key_the_value_and_what_is_allowed() -> None:
    (problem,) = routing_problems({R + "max-buffered": "lots", R + "hosts": "a,b"})
    assert str(problem) == (
        'routing.tidal.dev/max-buffered: "lots" is not allowed; '
        "allowed: an integer from 0 to 100000"
    )


def test_no_routing_keys_nothing_to_report() -> None:
    assert routing_problems({"autoscaling.tidal.dev/max-scale": "zero"}) == ()
