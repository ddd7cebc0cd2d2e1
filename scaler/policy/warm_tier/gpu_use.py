"""What a GPU is doing, for the bill: serving, starting, or holding only sleepers (pure).

A cloud bills a GPU (or a MIG slice, which is its own device) whole for as
long as anything holds it, however many time-sliced pods share it. So Tidal
counts GPU-hours by *device*, never by pod: a device counts from the moment
any pod is on it until the last one leaves, and each second of it is one of

    serving         at least one pod there is awake (serving, idle awake, or waking)
    starting        no pod awake, at least one in its cold start
    sleeping-only   every pod there is asleep: a device paid for nothing

The three add up to the device-hours held. *Sleeping-only* is the waste the
warm tier drives down: a sleeper beside an awake model costs the bill
nothing (that device is paid for anyway), while a device of sleepers alone
costs as much as a serving one. The scorecard of ``tidal simulate`` and the
scaler's cost line (``tidal status``) both split their device-hours with
:func:`gpu_use`.

Main decision: a wake counts as serving, not starting: a wake lasts about a
second and exists only because a request is being held for it, so it is
part of serving that request; a cold start is tens of seconds of a device
paid for before anything can be served, which is what *starting* shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["GpuSeconds", "GpuUse", "PodUse", "gpu_use"]


class PodUse(StrEnum):
    """What one pod on a device is doing."""

    AWAKE = "awake"  # serving or idle, its weights and KV cache on the device
    WAKING = "waking"  # a wake under way for a held request
    STARTING = "starting"  # in its cold start (loading), not ready yet
    ASLEEP = "asleep"  # vLLM sleep mode, at any level


class GpuUse(StrEnum):
    """What a device with at least one pod on it is doing (module docstring)."""

    SERVING = "serving"
    STARTING = "starting"
    SLEEPING_ONLY = "sleeping-only"


def gpu_use(pods: Iterable[PodUse]) -> GpuUse | None:
    """The device's use from its pods'; ``None`` when no pod is on it (not held)."""
    uses = set(pods)
    if not uses:
        return None
    if PodUse.AWAKE in uses or PodUse.WAKING in uses:
        return GpuUse.SERVING
    if PodUse.STARTING in uses:
        return GpuUse.STARTING
    return GpuUse.SLEEPING_ONLY


@dataclass(frozen=True, slots=True)
class GpuSeconds:
    """Device-seconds held, split by use; ``total`` is what the bill counts."""

    serving: float = 0.0
    starting: float = 0.0
    sleeping_only: float = 0.0

    def __post_init__(self) -> None:
        for name in ("serving", "starting", "sleeping_only"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} device-seconds must be >= 0; got {getattr(self, name)}")

    @property
    def total(self) -> float:
        return self.serving + self.starting + self.sleeping_only

    def add(self, use: GpuUse | None, seconds: float) -> GpuSeconds:
        """These totals with ``seconds`` more of one device at ``use`` (None: not held)."""
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0; got {seconds}")
        if use is None or seconds == 0:
            return self
        if use is GpuUse.SERVING:
            return GpuSeconds(self.serving + seconds, self.starting, self.sleeping_only)
        if use is GpuUse.STARTING:
            return GpuSeconds(self.serving, self.starting + seconds, self.sleeping_only)
        return GpuSeconds(self.serving, self.starting, self.sleeping_only + seconds)
