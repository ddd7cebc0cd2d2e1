"""The stats report's held-by-class fields: present where classes are in use, else absent.

Covers: a target whose held requests are all standard and that shed nothing
reports as before (no class fields); one holding a critical request, or
having shed one in the period, reports held requests by class and the sheds
of the period, which the next report counts from zero.
"""

from __future__ import annotations

import asyncio

import pytest

from activator.holding.gate import Shed
from activator.holding.request_class import HoldClass
from activator.routing.registry import Registry
from activator.scaler_link.reporting import build_report
from activator.targets import Discovered, TargetSpec

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
    first = build_report(activator="a", registry=registry, elapsed_s=1.0)["targets"]
    assert "held_critical" not in first["ns/plain"] and "shed" not in first["ns/plain"]
    got = {k: v for k, v in first["ns/ranked"].items() if k.startswith(("held_", "shed"))}
    assert got == {"held_critical": 1, "held_standard": 0, "held_sheddable": 0, "shed": 1}
    second = build_report(activator="a", registry=registry, elapsed_s=1.0)["targets"]
    assert second["ns/ranked"]["shed"] == 0 and second["ns/ranked"]["held_critical"] == 1
    for task in held:
        task.cancel()
    results = await asyncio.gather(*held, return_exceptions=True)
    assert isinstance(results[1], Shed)
