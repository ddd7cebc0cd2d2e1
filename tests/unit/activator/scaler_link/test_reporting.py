"""The stats report's held-by-class fields: present where classes are in use, else absent.

Covers: a target whose held requests are all standard and that shed nothing
reports as before (no class fields on the wire); one holding a critical
request, or having shed one in the period, reports held requests by class
and the sheds of the period (as the scaler reads them), which the next
report counts from zero.
"""

from __future__ import annotations

import asyncio

import pytest

from activator.holding.gate import Shed
from activator.holding.request_class import HoldClass
from activator.routing.registry import Registry
from activator.scaler_link.reporting import build_report
from activator.targets import Discovered, TargetSpec
from groundwork.rules.stats_report import parse_report

pytestmark = pytest.mark.looptime


async def test_held_by_class_is_reported_only_where_classes_are_in_use() -> None:
    registry = Registry()
    registry.apply(
        {
            "ns/plain": Discovered(TargetSpec(name="ns/plain", models=("p",))),
            "ns/ranked": Discovered(TargetSpec(name="ns/ranked", models=("r",), max_buffered=1)),
        }
    )
    plain, ranked = registry.targets["ns/plain"].gate, registry.targets["ns/ranked"].gate
    held = [asyncio.create_task(plain.acquire(60))]
    held.append(asyncio.create_task(ranked.acquire(60, HoldClass(-1, "", 1))))
    await asyncio.sleep(0)
    held.append(asyncio.create_task(ranked.acquire(60, HoldClass(1, "", 1))))  # sheds
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the shed caller wakes and leaves
    body = build_report(activator="a", registry=registry, elapsed_s=1.0)
    assert not [k for k in body["targets"]["ns/plain"] if k.startswith(("held_", "shed"))]
    first = parse_report(body).targets["ns/ranked"]
    got = (first.held_critical, first.held_standard, first.held_sheddable, first.shed)
    assert got == (1, 0, 0, 1)
    second = parse_report(build_report(activator="a", registry=registry, elapsed_s=1.0))
    assert (second.targets["ns/ranked"].shed, second.targets["ns/ranked"].held_critical) == (0, 1)
    for task in held:
        task.cancel()
    results = await asyncio.gather(*held, return_exceptions=True)
    assert isinstance(results[1], Shed)
