"""The ``tidal`` command: the one composition root.

Every subcommand lives in its own module, which this file imports only when
that subcommand runs. Two reasons: ``tidal --help`` and ``tidal status`` stay
fast (the sandbox pulls in schema validators, locust pulls in gevent), and the
import rules hold (``scaler`` and ``activator`` never import each other; this
file is the one allowed exception, and only lazily; docs/architecture.md,
"Layout and import rules").

A subcommand module provides::

    def configure(parser: argparse.ArgumentParser) -> None   # add its flags
    def run(args: argparse.Namespace) -> int                  # exit status

A subcommand is listed only once its module exists ("the subcommands built so
far"); :func:`importlib.util.find_spec` tells that without importing it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Protocol, cast

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]


class SubcommandModule(Protocol):
    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


@dataclass(frozen=True, slots=True)
class Subcommand:
    """One ``tidal`` subcommand: the words that select it and the module behind it."""

    path: tuple[str, ...]
    module: str
    help: str

    def available(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except ModuleNotFoundError:  # a parent package is missing
            return False

    def load(self) -> SubcommandModule:
        return cast(SubcommandModule, importlib.import_module(self.module))


# Groups (such as ``sandbox``) have no module of their own: they exist when at
# least one of their children does.
GROUP_HELP: dict[str, str] = {
    "sandbox": "the emulated cluster and fake GPU model servers (no cluster, no GPU)",
}

SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(("activator",), "activator.cli", "run the activator (the request-holding proxy)"),
    Subcommand(("scaler",), "scaler.service", "run the scaler (the controller)"),
    Subcommand(("status",), "scaler.status", "list opted-in Deployments and their scaling state"),
    Subcommand(("demo",), "loadtests.demo.story", "watch scale-from-zero and back, end to end"),
    Subcommand(
        ("sandbox", "up"),
        "loadtests.sandbox.up",
        "start the sandbox with the activator, the scaler and an example model",
    ),
    Subcommand(
        ("sandbox", "cluster"),
        "loadtests.sandbox.cluster.cli",
        "start only the emulated Kubernetes cluster",
    ),
    Subcommand(
        ("sandbox", "model-server"),
        "loadtests.sandbox.servers.cli",
        "run one fake vLLM- or Triton-like model server",
    ),
    Subcommand(
        ("sandbox", "epp"),
        "loadtests.sandbox.epp.cli",
        "run a fake endpoint picker (gateway and EPP) for an InferencePool",
    ),
    Subcommand(
        ("sandbox", "preempt"),
        "loadtests.sandbox.cluster.preempt",
        "preempt a spot node: interruption notice, then removal",
    ),
    Subcommand(
        ("sandbox", "spot-capacity"),
        "loadtests.sandbox.cluster.spot_capacity",
        "set how many spot GPUs the sandbox's cloud gives out (spot can run out)",
    ),
    Subcommand(
        ("simulate",),
        "simulator.cli",
        "replay a trace through a policy in simulated time and print the scorecard",
    ),
)


def _package_version() -> str:
    try:
        return version("tidal-autoscaler")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def _selected(argv: Sequence[str], available: Sequence[Subcommand]) -> Subcommand | None:
    """The subcommand that ``argv`` names, found by its leading words."""
    words: list[str] = []
    for arg in argv:
        if arg.startswith("-"):
            break
        words.append(arg)
    for sub in available:
        if tuple(words[: len(sub.path)]) == sub.path:
            return sub
    return None


def build_parser(
    argv: Sequence[str] = (), subcommands: Sequence[Subcommand] | None = None
) -> tuple[argparse.ArgumentParser, dict[tuple[str, ...], Callable[[argparse.Namespace], int]]]:
    """Build the parser; only the subcommand ``argv`` selects is imported and configured."""
    available = [s for s in (SUBCOMMANDS if subcommands is None else subcommands) if s.available()]
    chosen = _selected(argv, available)
    parser = argparse.ArgumentParser(
        prog="tidal",
        description=(
            "Tidal: scale-to-zero autoscaling for GPU inference on Kubernetes. "
            "The activator holds requests through cold starts; the scaler sizes "
            "each model on queue depth, concurrency, KV cache and GPU utilization."
        ),
    )
    parser.add_argument("--version", action="version", version=f"tidal {_package_version()}")
    runners: dict[tuple[str, ...], Callable[[argparse.Namespace], int]] = {}
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Each group's subparsers, as the one call used of them (argparse's type is private).
    AddParser = Callable[..., argparse.ArgumentParser]
    groups: dict[str, AddParser] = {}
    for sub in available:
        add_parser: AddParser
        if len(sub.path) == 1:
            add_parser = top.add_parser
        else:
            group = sub.path[0]
            if group not in groups:
                gp = top.add_parser(
                    group, help=GROUP_HELP.get(group, ""), description=GROUP_HELP.get(group)
                )
                gp.set_defaults(_tidal_group=gp)
                subparsers = gp.add_subparsers(dest=f"{group}_command", metavar="COMMAND")
                groups[group] = subparsers.add_parser
            add_parser = groups[group]
        sp = add_parser(sub.path[-1], help=sub.help, description=sub.help)
        sp.set_defaults(_tidal_path=sub.path, _tidal_parser=sp)
        if sub is chosen:
            module = sub.load()
            module.configure(sp)
            runners[sub.path] = module.run
    return parser, runners


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser, runners = build_parser(args_list)
    args, unknown = parser.parse_known_args(args_list)
    if unknown:
        # Said by the subcommand's parser, with its usage: the flag is its to know.
        owner: argparse.ArgumentParser = getattr(args, "_tidal_parser", parser)
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    path: tuple[str, ...] | None = getattr(args, "_tidal_path", None)
    if path is None or path not in runners:
        # A bare group (``tidal sandbox``) shows its own commands.
        group: argparse.ArgumentParser = getattr(args, "_tidal_group", parser)
        group.print_help()
        return 2
    return runners[path](args)


if __name__ == "__main__":
    sys.exit(main())
