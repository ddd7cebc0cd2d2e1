"""A demand source is one module and one registration line; nothing else names it.

Covers:
- the polled sources are the settings groups that register them, in their
  order, each built only when on (scrape unless disabled, Prometheus with a
  URL), with a freshness bound of one poll and a half plus its timeout;
- a new source (a module of the test's own: its settings group and its
  source) joins with one field in the settings and is polled and combined
  by the hub like the others, its utilization fresh within its own bound;
- every module that defines a demand source is forbidden to the hub, the
  combination, the interface, the registry, the reconcilers and the
  controller (the import contract names them all), no source's name is
  written in those modules, and the service imports no polled source.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import tomllib
from collections.abc import Sequence
from pathlib import Path

import aiohttp
import grimp
import pytest
from pydantic import Field

import scaler.signals
from scaler.policy.api import ScalingConfig, SignalKind
from scaler.settings import ScalerSettings
from scaler.signals.base import SourceReading, TargetPods
from scaler.signals.hub import HubSettings, SignalHub
from scaler.signals.registry import Polled, PolledSourceSettings, SourceContext, polled_sources

pytestmark = pytest.mark.looptime

ROOT = Path(__file__).resolve().parents[4]
CONTRACT = "the hub knows no source"


class Picker:
    """An endpoint picker's queue as a source: what a new source module would hold."""

    name = "a-picker"

    def __init__(self) -> None:
        self.queue: dict[str, float] = {}

    @property
    def feeds(self) -> frozenset[SignalKind]:
        return frozenset({SignalKind.QUEUE_DEPTH, SignalKind.GPU_UTILIZATION})

    async def refresh(self, targets: Sequence[TargetPods], *, now: float) -> None:
        self.queue = {t.key: 4.0 for t in targets}

    def read(self, key: str, *, now: float) -> SourceReading | None:
        if key not in self.queue:
            return None
        signals = {SignalKind.QUEUE_DEPTH: self.queue[key], SignalKind.GPU_UTILIZATION: 0.5}
        return SourceReading(fresh=True, reporters=1, signals=signals)


class PickerSettings(PolledSourceSettings):
    url: str | None = Field(None, description="the picker's metrics URL (unset: off)")

    def build(self, context: SourceContext) -> Polled | None:
        return Polled(Picker(), 3.0, 12.0) if self.url else None


class SettingsWithAPicker(ScalerSettings):
    picker: PickerSettings = Field(default_factory=PickerSettings)  # the one line


async def test_the_polled_sources_are_the_registered_settings_groups() -> None:
    async with aiohttp.ClientSession() as session:
        plain = polled_sources(ScalerSettings(), SourceContext(session))
        # The endpoint picker is polled at its waiting room's pace, fresh by its full
        # readings' (every 1 s): 1.5 of them plus the timeout.
        assert [(p.source.name, p.every_s, p.fresh_within_s) for p in plain] == [
            ("scrape", 2.0, 4.0),
            ("endpoint-picker", 0.25, 2.5),
        ]
        both = ScalerSettings(
            prometheus={"url": "http://prom:9090", "interval_s": 10.0},
            endpoint_picker={"enabled": False},
        )
        assert [
            (p.source.name, p.fresh_within_s) for p in polled_sources(both, SourceContext(session))
        ] == [
            ("scrape", 4.0),
            ("prometheus", 17.0),
        ]
        none = ScalerSettings(scrape={"enabled": False}, endpoint_picker={"enabled": False})
        assert polled_sources(none, SourceContext(session)) == []


class Catalog:
    def configs(self) -> dict[str, ScalingConfig | None]:
        return {"ns/a": ScalingConfig(target_queue_depth=2.0, target_gpu_utilization=0.5)}


async def test_a_new_source_is_its_module_and_one_settings_field() -> None:
    settings = SettingsWithAPicker(picker={"url": "http://picker:9090"})
    async with aiohttp.ClientSession() as session:
        polled = polled_sources(settings, SourceContext(session))
    assert [p.source.name for p in polled] == ["scrape", "endpoint-picker", "a-picker"]
    picker = polled[2]
    hub = SignalHub(
        sources=[p.source for p in polled],
        catalog=Catalog(),
        settings=HubSettings(
            source_fresh_within_s={p.source.name: p.fresh_within_s for p in polled}
        ),
    )
    await picker.source.refresh([TargetPods("ns/a", "ns", "vllm", ())], now=0.0)
    assert hub.arrived(picker.source.name, now=0.0) == 1
    view = hub.observe("ns/a", Catalog().configs()["ns/a"], now=10.0)
    assert view.combined.values[SignalKind.QUEUE_DEPTH] == 4.0
    gpu = view.readings[SignalKind.GPU_UTILIZATION]
    assert (gpu.stable, gpu.fresh) == (0.5, True)  # within the picker's 12 s, not the hub's 5 s


def _source_modules() -> set[str]:
    """Every scaler.signals module that defines a demand source (a class with ``feeds``
    and ``read``)."""
    found = set()
    for info in pkgutil.iter_modules(scaler.signals.__path__, prefix="scaler.signals."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            interface = getattr(cls, "_is_protocol", False)  # DemandSource itself
            source = hasattr(cls, "feeds") and hasattr(cls, "read") and not interface
            if cls.__module__ == info.name and source:
                found.add(info.name)
    return found


def _contract() -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [contract] = [
        c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith(CONTRACT)
    ]
    return contract  # type: ignore[no-any-return]


def test_every_source_module_is_forbidden_to_the_hub_and_its_readers() -> None:
    sources = _source_modules()
    assert sources >= {
        "scaler.signals.activator_reports",
        "scaler.signals.scrape",
        "scaler.signals.prometheus",
        "scaler.signals.endpoint_picker",
    }
    forbidden = _contract()["forbidden_modules"]
    assert isinstance(forbidden, list)
    assert sources == set(forbidden), "list every source module in the import contract"


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


@pytest.mark.parametrize("module", ["hub", "combine", "base", "registry"])
def test_no_source_is_named_where_sources_are_combined(module: str) -> None:
    names = {"activator", "scrape", "prometheus", "endpoint-picker"}
    written = _string_constants(ROOT / "scaler" / "signals" / f"{module}.py")
    assert not names & written, f"scaler/signals/{module}.py names a source"


def test_the_service_builds_no_polled_source_itself() -> None:
    graph = grimp.build_graph("scaler", cache_dir=None)
    imported = graph.find_modules_directly_imported_by("scaler.service")
    polled = _source_modules() - {"scaler.signals.activator_reports"}
    assert not imported & polled, f"scaler.service imports {imported & polled}"
