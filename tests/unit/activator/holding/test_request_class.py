"""A held request's class, tenant and cost, from its headers and parsed body.

Covers: the priority header by name or number, a bad one falling back to the
target's default (and flagged), absent to the default; the tenant from
``x-tidal-tenant``, else GIE's fairness id, else a keyed hash of the bearer
credential that never contains it and is stable within the process, else
none; the cost in estimated tokens when the body was parsed, else 1.
"""

from __future__ import annotations

from activator.holding.request_class import HoldClass, hold_class


def test_the_class_comes_from_the_header_else_the_default() -> None:
    assert hold_class({b"x-tidal-priority": b"critical"}, 0).priority == 1
    assert hold_class({b"x-tidal-priority": b" -20 "}, 0).priority == -20
    assert hold_class({}, -1) == HoldClass(-1, "", 1)
    bad = hold_class({b"x-tidal-priority": b"urgent"}, -1)
    assert (bad.priority, bad.bad_priority) == (-1, True)


def test_the_tenant_comes_from_its_header_then_gies_then_the_credential() -> None:
    both = {b"x-tidal-tenant": b"team-a", b"x-gateway-inference-fairness-id": b"flow-9"}
    assert hold_class(both, 0).tenant == "team-a"
    assert hold_class({b"x-gateway-inference-fairness-id": b"flow-9"}, 0).tenant == "flow-9"
    assert hold_class({b"x-tidal-tenant": b"x" * 1000}, 0).tenant == "x" * 128
    secret = b"sk-live-0123456789abcdef"
    one = hold_class({b"authorization": b"Bearer " + secret}, 0).tenant
    again = hold_class({b"authorization": b"bearer  " + secret}, 0).tenant
    other = hold_class({b"authorization": b"Bearer sk-live-other"}, 0).tenant
    assert one == again != other
    assert one.startswith("key:") and secret.decode() not in one and len(one) == 4 + 16
    assert hold_class({b"authorization": b"Basic dXNlcjpwdw=="}, 0).tenant == ""
    assert hold_class({b"authorization": b"Bearer "}, 0).tenant == ""


def test_the_cost_is_the_estimated_tokens_of_a_parsed_body() -> None:
    document = {"model": "m", "prompt": "x" * 400, "max_tokens": 50}
    assert hold_class({}, 0, document).cost == 100 + 50
    assert hold_class({}, 0, {"model": "m"}).cost == 1  # nothing to count: still 1
    assert hold_class({}, 0).cost == 1  # routed by host: by request count
