"""The requests the flags describe: a file, a named trace or a synthetic one, windowed, scaled.

A file in time order and the synthetic kinds that draw in time order are
read as streams (:class:`~simulator.trace_stream.StreamedTrace`: each row
reads them afresh, so their length costs no memory); the others are lists.
The window (``--skip``, ``--duration``) and the load factor apply to either
the same way. Prompt blocks are the trace's own size: 16 tokens (vLLM's) for
the synthetic prefix workloads, 512 (Mooncake's) for a file, unless
``--prefix-block-tokens`` says otherwise.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from simulator import prefix_workloads, synthetic, traces
from simulator.chat_trace import MEAN_TURNS, ChatSpec, generate_chat
from simulator.trace_stream import StreamedTrace, scaled, windowed

__all__ = ["CHAT_TRACE", "block_tokens", "load_requests", "scale_load", "synthetic_shape"]


# The synthetic chat trace's blocks are vLLM's 16 tokens, a file's (Mooncake's) 512.
CHAT_TRACE = "synthetic:chat"
_CHAT_BLOCK_TOKENS = 16
_FILE_BLOCK_TOKENS = 512


def synthetic_shape(args: argparse.Namespace) -> tuple[float, float]:
    """A synthetic trace's length and mean rate (per minute): the flags', else its kind's."""
    kind = args.trace.removeprefix("synthetic:")
    duration = args.synthetic_duration
    if duration is None:
        days = synthetic.DEFAULT_DURATION_S.get(kind, 3600.0) / synthetic.DAY_S
        duration = days * args.day_length if kind in ("diurnal", "week") else 3600.0
    rate = args.synthetic_rate
    if rate is None:
        rate = synthetic.PRODUCTION_DAY_PER_MIN if kind in ("diurnal", "week") else 154.0
    return float(duration), float(rate)


def load_requests(args: argparse.Namespace, *, warn: bool = True) -> Sequence[traces.TraceRequest]:
    """The workload the flags describe (a file, a named trace, or a synthetic one).

    A file in time order and the synthetic kinds that draw in time order are
    read as streams (:class:`~simulator.trace_stream.StreamedTrace`: each
    row reads them afresh, so their length costs no memory); the others are
    lists. ``warn``: print to stderr what reading the trace noticed (skipped
    rows, a doubtful time unit).
    """
    name: str = args.trace
    source = _source(args, warn=warn)
    whole = not (args.skip or args.duration is not None or args.load_factor != 1)
    if isinstance(source, StreamedTrace) and whole:
        records: Sequence[traces.TraceRequest] = source
    elif isinstance(source, StreamedTrace) or callable(source):
        opener = source.__iter__ if isinstance(source, StreamedTrace) else source
        records = StreamedTrace(
            lambda: scaled(
                windowed(opener(), start_s=args.skip, duration_s=args.duration),
                args.load_factor,
                seed=args.seed,
            )
        )
    else:
        records = traces.window(source, start_s=args.skip, duration_s=args.duration)
        records = scale_load(records, args.load_factor, seed=args.seed)
    if not records:
        raise traces.TraceError(f"{name}: no request in the window the flags select")
    return records


def _source(
    args: argparse.Namespace, *, warn: bool
) -> Sequence[traces.TraceRequest] | Callable[[], Iterator[traces.TraceRequest]]:
    """The whole trace the flags name, before the window and the load factor: a list, a
    file read as a stream, or how to draw a synthetic one (read only through the window)."""
    name: str = args.trace
    synthetic_s, synthetic_rate = synthetic_shape(args)
    kind = name.removeprefix("synthetic:")
    if name == CHAT_TRACE:
        return generate_chat(
            ChatSpec(
                duration_s=synthetic_s,
                conversations_per_s=synthetic_rate / 60.0 / MEAN_TURNS,
                block_tokens=block_tokens(args),
                seed=args.seed,
            )
        )
    if kind in prefix_workloads.WORKLOADS:
        return prefix_workloads.generate_workload(
            prefix_workloads.WorkloadSpec(
                kind=kind,
                duration_s=synthetic_s,
                rate_per_s=synthetic_rate / 60.0,
                block_tokens=block_tokens(args),
                seed=args.seed,
            )
        )
    if name.startswith("synthetic:"):
        spec = synthetic.SyntheticSpec(
            kind=kind,
            duration_s=synthetic_s,
            requests_per_min=synthetic_rate,
            models=args.synthetic_models,
            seed=args.seed,
            day_s=args.day_length,
        )
        if kind == "many-models":
            return synthetic.generate(spec)  # drawn model by model: made whole
        return lambda: synthetic.stream(spec)
    fmt = traces.TraceFormat(
        time_field=args.time_field,
        prompt_field=args.prompt_field,
        output_field=args.output_field,
        model_field=args.model_field,
        prefix_field=args.prefix_field,
        class_field=args.class_field,
        tenant_field=args.tenant_field,
        time_unit=args.time_unit,
        timestamps=args.timestamps,
        kind=args.format,
    )
    path = traces.find_trace(name)
    notes: list[str] = []
    # Only the first reading notes what it skipped.
    first = iter([notes])
    records: Sequence[traces.TraceRequest]
    try:
        records = StreamedTrace(lambda: traces.stream_trace(path, fmt, notes=next(first, None)))
    except traces.UnsortedTraceError:
        notes = []
        records = traces.read_trace(path, fmt, notes=notes)
    for warning in [*notes, *traces.unit_warnings(records, fmt)] if warn else []:
        print(f"tidal simulate: warning: {name}: {warning}", file=sys.stderr)
    return records


def scale_load(
    records: Sequence[traces.TraceRequest], factor: float, *, seed: int
) -> list[traces.TraceRequest]:
    """Each request ``int(factor)`` times, and once more with probability ``factor - int(factor)``.

    Copies are spread evenly within the second after the original, so a
    burst stays a burst but is not k requests at one instant. A fraction
    thins the trace with a seeded draw per request.
    """
    if not factor > 0:
        raise traces.TraceError(f"--load-factor must be > 0, got {factor}")
    if factor == 1:
        return list(records)
    whole, part = int(factor), factor - int(factor)
    rng = random.Random(seed)
    out: list[traces.TraceRequest] = []
    for r in records:
        copies = whole + (1 if part > 0 and rng.random() < part else 0)
        out.extend(replace(r, offset_s=r.offset_s + j / copies) for j in range(copies))
    out.sort(key=lambda r: r.offset_s)
    return out


def block_tokens(args: argparse.Namespace) -> int:
    """Tokens per prompt block: ``--prefix-block-tokens``, else the trace's own size."""
    if args.prefix_block_tokens is not None:
        if args.prefix_block_tokens < 1:
            raise ValueError(f"--prefix-block-tokens must be >= 1, got {args.prefix_block_tokens}")
        return int(args.prefix_block_tokens)
    synthetic_blocks = args.trace == CHAT_TRACE or (
        args.trace.removeprefix("synthetic:") in prefix_workloads.WORKLOADS
    )
    return _CHAT_BLOCK_TOKENS if synthetic_blocks else _FILE_BLOCK_TOKENS
