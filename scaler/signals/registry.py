"""How a polled source joins the scaler: its settings group is its registration.

A polled source's module holds the source and its settings group, a
:class:`PolledSourceSettings` that knows how to build it (or that it is
off: no URL, disabled). A field of that type in
:class:`~scaler.settings.ScalerSettings` is the one line that registers
the source: :func:`polled_sources` finds every such field, in the order
the fields are declared, and builds what is on. The service polls each on
its own schedule and hands its arrivals to the hub; neither names a
source, and neither does the hub, which combines readings by what each
source measures (docs/architecture.md, "The signal sources", says how to
add one).

Main decision: a source's freshness bound is its own (one poll and a half
plus its timeout: a sample arrives once per poll, and a poll may take its
whole timeout), handed to the hub with the source; the hub gives each
utilization its most direct source's bound.

The activators' reports are the one source pushed to the scaler: they
arrive at the scaler's own HTTP API, which records them in
:class:`~scaler.signals.activator_reports.ActivatorReports` and tells the
hub, so they are built with the API rather than here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import aiohttp
from pydantic import BaseModel

from scaler.signals.base import PolledSource

__all__ = ["Polled", "PolledSourceSettings", "SourceContext", "polled_sources"]


@dataclass(frozen=True, slots=True)
class SourceContext:
    """What the service hands a source's settings to build it with (more may come,
    such as a listing of what to poll, without changing the sources that need none)."""

    session: aiohttp.ClientSession  # the scaler's HTTP client session


@dataclass(frozen=True, slots=True)
class Polled:
    """A polled source, how often it is refreshed, and how long its samples stay fresh."""

    source: PolledSource
    every_s: float
    fresh_within_s: float


class PolledSourceSettings(BaseModel, ABC):
    """A polled source's settings group; a field of this type in ScalerSettings registers it."""

    @abstractmethod
    def build(self, context: SourceContext) -> Polled | None:
        """The source these settings describe; ``None`` when it is off."""


def polled_sources(settings: BaseModel, context: SourceContext) -> list[Polled]:
    """Every polled source ``settings`` registers and turns on, in the fields' order."""
    built = []
    for name in type(settings).model_fields:
        group = getattr(settings, name)
        if isinstance(group, PolledSourceSettings):
            polled = group.build(context)
            if polled is not None:
                built.append(polled)
    return built
