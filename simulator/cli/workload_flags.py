"""The workload's flags: which trace, which of its fields hold what, and what part is replayed.

A trace is a file, a named trace (``code``, ``conv``) or ``synthetic:KIND``;
the field flags name a file's columns (the Azure 2023 trace's by default);
the window flags cut and scale it (``--skip``, ``--duration``,
``--load-factor``), set the synthetic kinds' length, rate and models, and
the seeds.
"""

from __future__ import annotations

import argparse

from simulator import prefix_workloads, synthetic
from simulator.chat_trace import MEAN_TURNS
from simulator.cli.flag_types import FlagGroup, duration, positive

__all__ = ["workload_flags"]


def workload_flags(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("workload")
    src.add_argument(
        "--trace",
        default=None,
        help="required unless --adapters: a CSV or JSONL file; code or conv, the Azure LLM "
        "inference traces 2023 shipped with Tidal (CC-BY-4.0; or any file in "
        "$TIDAL_TRACES_DIR); or synthetic:KIND with KIND one of "
        f"{', '.join((*synthetic.KINDS, 'chat', *prefix_workloads.WORKLOADS))} (chat, "
        "documents, agents, few-shot: prompts with block ids that share prefixes, for "
        "--routing; documents and few-shot: --synthetic-rate requests/min, agents: tasks/min)",
    )
    _field_flags(parser.add_argument_group("trace fields"))
    _window_flags(parser.add_argument_group("what is replayed"))


def _field_flags(src: FlagGroup) -> None:
    """Which fields of a trace file hold what."""
    src.add_argument(
        "--time-field",
        default="TIMESTAMP",
        metavar="FIELD",
        help="timestamp field (default %(default)s)",
    )
    src.add_argument(
        "--prompt-field",
        default="ContextTokens",
        metavar="FIELD",
        help="prompt-token field (default %(default)s)",
    )
    src.add_argument(
        "--output-field",
        default="GeneratedTokens",
        metavar="FIELD",
        help="output-token field (default %(default)s)",
    )
    src.add_argument(
        "--model-field", default=None, metavar="FIELD", help="model field (default: one model)"
    )
    src.add_argument(
        "--prefix-field",
        default=None,
        metavar="FIELD",
        help="field holding the prompt as a list of block hashes (as Mooncake's hash_ids): "
        "replicas then serve shared prefixes from an LRU prefix cache (default: none)",
    )
    src.add_argument(
        "--class-field",
        default=None,
        metavar="FIELD",
        help="field holding each request's priority class (critical, standard, sheddable or "
        "a whole number, higher first): held requests are released by class, and TTFT is "
        "reported per class (default: none, every request standard)",
    )
    src.add_argument(
        "--tenant-field",
        default=None,
        metavar="FIELD",
        help="field naming each request's tenant: within a class, held requests are released "
        "in turns across tenants weighted by tokens (default: none, one tenant)",
    )
    src.add_argument(
        "--prefix-block-tokens",
        type=int,
        default=None,
        metavar="TOKENS",
        help="tokens per block hash in --prefix-field (default 512, the Mooncake traces'; "
        "synthetic:chat: 16, vLLM's block)",
    )


def _window_flags(src: FlagGroup) -> None:
    """How the trace is read and which part of it is replayed, and the synthetic ones."""
    src.add_argument(
        "--time-unit", choices=("s", "ms"), default="s", help="numeric timestamp unit (default s)"
    )
    src.add_argument(
        "--timestamps",
        choices=("auto", "absolute", "relative"),
        default="auto",
        help="absolute times are re-based to the first request; relative ones kept (default auto)",
    )
    src.add_argument(
        "--format",
        choices=("auto", "csv", "jsonl"),
        default="auto",
        help="the trace file's format (default auto: by its extension)",
    )
    src.add_argument(
        "--skip",
        type=duration,
        default=0.0,
        metavar="DURATION",
        help="skip this much of the trace's beginning (default 0s)",
    )
    src.add_argument(
        "--duration",
        type=duration,
        default=None,
        metavar="DURATION",
        help="replay only this much (default: all of it)",
    )
    src.add_argument(
        "--load-factor",
        type=positive,
        default=1.0,
        metavar="F",
        help="scale the load: each request is sent int(F) times (spread within its second) "
        "and once more with probability F - int(F), so 0.5 keeps half the requests (seeded; "
        "default 1)",
    )
    src.add_argument(
        "--synthetic-duration",
        type=duration,
        default=None,
        metavar="DURATION",
        help="length of a synthetic:KIND trace (default 1h; diurnal: 24h, week: 7 days of "
        "--day-length)",
    )
    src.add_argument(
        "--synthetic-rate",
        type=positive,
        default=None,
        metavar="PER-MIN",
        help="mean requests/min of a synthetic:KIND trace (default 154; diurnal and week: "
        f"{synthetic.PRODUCTION_DAY_PER_MIN:,.0f}, the Azure LLM trace 2024's code service; "
        f"synthetic:chat: conversations start at this over their mean {MEAN_TURNS:.1f} turns)",
    )
    src.add_argument(
        "--day-length",
        type=duration,
        default=synthetic.DAY_S,
        metavar="DURATION",
        help="the day of synthetic:diurnal and synthetic:week (default 24h, a real day; 20m "
        "compresses it, for a quick look)",
    )
    src.add_argument(
        "--synthetic-models",
        type=int,
        default=100,
        metavar="N",
        help="models in a synthetic:KIND trace (default 100)",
    )
    src.add_argument(
        "--seed", type=int, default=1, metavar="N", help="random seed of the run (default 1)"
    )
    src.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="N",
        help="run this many seeds from --seed and report each column's mean and spread (default 1)",
    )
