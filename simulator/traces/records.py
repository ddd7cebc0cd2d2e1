"""What a trace is: its requests (:class:`TraceRequest`), how a file holds them
(:class:`TraceFormat`), and the errors reading or cutting one raises.

A record says when a request arrives (seconds from the start of the trace),
how many prompt tokens it carries, how many tokens it generates, and
optionally its model, its prompt as block hashes (as the Mooncake traces'
``hash_ids``), its priority class and its tenant. A format names the fields
(the defaults, :data:`AZURE_2023`, are the Azure LLM inference trace 2023
columns), the time unit, absolute or relative timestamps and the file's
kind; it checks itself when built, so a bad setting is an error naming it
before any file is opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "AZURE_2023",
    "FileKind",
    "TimeUnit",
    "Timestamps",
    "TraceError",
    "TraceFormat",
    "TraceRequest",
    "UnsortedTraceError",
]

TimeUnit = Literal["s", "ms"]
Timestamps = Literal["auto", "absolute", "relative"]
FileKind = Literal["auto", "csv", "jsonl"]


class TraceError(ValueError):
    """A trace file or a trace parameter is not usable; the message says why."""


class UnsortedTraceError(TraceError):
    """A trace read as a stream is not in time order (read it whole: it is sorted then)."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace."""

    offset_s: float  # seconds since the start of the (windowed) trace
    prompt_tokens: int
    output_tokens: int
    model: str = ""  # empty: the trace has one model
    # The prompt as block hashes (the trace's prefix field); empty: unknown.
    prefix: tuple[int | str, ...] = ()
    # Its priority class (groundwork.rules.priority: higher first) and tenant, from
    # the trace's class and tenant fields; 0 and "" when it has none.
    priority: int = 0
    tenant: str = ""


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """How to read a trace file: field names, time unit, absolute or relative times.

    ``model_field`` is optional: when set, each row names its model and the
    simulator sizes each model on its own (a pool of many small deployments).
    """

    time_field: str = "TIMESTAMP"
    prompt_field: str = "ContextTokens"
    output_field: str = "GeneratedTokens"
    model_field: str | None = None
    prefix_field: str | None = None
    class_field: str | None = None
    tenant_field: str | None = None
    time_unit: TimeUnit = "s"
    timestamps: Timestamps = "auto"
    kind: FileKind = "auto"

    def __post_init__(self) -> None:
        if self.time_unit not in ("s", "ms"):
            raise TraceError(f"time unit must be 's' or 'ms', got {self.time_unit!r}")
        if self.timestamps not in ("auto", "absolute", "relative"):
            raise TraceError(
                f"timestamps must be 'auto', 'absolute' or 'relative', got {self.timestamps!r}"
            )
        if self.kind not in ("auto", "csv", "jsonl"):
            raise TraceError(f"trace format must be 'auto', 'csv' or 'jsonl', got {self.kind!r}")
        for name in ("time_field", "prompt_field", "output_field"):
            if not getattr(self, name):
                raise TraceError(f"{name} must name a field, got an empty string")
        for name in ("model_field", "prefix_field", "class_field", "tenant_field"):
            if getattr(self, name) == "":
                raise TraceError(f"{name} must name a field or be left out, got an empty string")

    @property
    def fields(self) -> tuple[str, ...]:
        optional = tuple(
            f
            for f in (self.model_field, self.prefix_field, self.class_field, self.tenant_field)
            if f is not None
        )
        return (self.time_field, self.prompt_field, self.output_field, *optional)


AZURE_2023 = TraceFormat()
