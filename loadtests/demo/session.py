"""One demo session: the sandbox a story plays on, and how its outcome is reported.

The three stories of ``tidal demo`` (``scale``, ``warm``, ``spot``) differ in
what they do and measure; everything around that is here, once:

- **where the sandbox lives**: ``--dir`` (``/tmp/tidal-sandbox`` unless
  given, as for ``tidal sandbox up``), kept with its logs;
- **where the text goes**: what a person reads to stdout, or to stderr with
  ``--json``, so that stdout carries the JSON line alone (``| jq`` works);
- **Ctrl-C and SIGTERM**: the sandbox is stopped (its processes with it)
  and the demo exits 130; a cancellation from anywhere else propagates;
- **the exit code**: 1 when anything went wrong, 0 otherwise.

Main decision: a sandbox that fails mid-story is still summarized (the
story's figures until then, plus the failure as a problem) rather than
ending in a traceback: the figures seen so far are what a user debugging it
needs, beside the logs that are kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import aiohttp

from loadtests.demo.view import Console
from loadtests.sandbox.stack import SandboxStack

__all__ = ["INTERRUPTED", "DemoSession"]

# The exit code of a demo stopped by Ctrl-C or SIGTERM (128 + SIGINT).
INTERRUPTED = 130


@dataclass(slots=True)
class DemoSession:
    """Where one story runs and reports; :meth:`open` it from the parsed flags."""

    directory: Path
    human: TextIO
    console: Console
    json: bool
    started: float

    @classmethod
    def open(cls, args: argparse.Namespace) -> DemoSession:
        human = sys.stderr if args.json else sys.stdout
        return cls(
            directory=args.dir.resolve(),
            human=human,
            console=Console(human),
            json=bool(args.json),
            started=time.monotonic(),
        )

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    async def play(
        self, stack: SandboxStack, intro: str, story: Callable[[], Awaitable[None]]
    ) -> str | None:
        """Start ``stack``, play ``story`` on it, stop it whatever happens.

        Returns "" when the story ran to its end, the failure when the sandbox
        failed, and None when Ctrl-C or SIGTERM stopped it.
        """
        main_task = asyncio.current_task()
        assert main_task is not None
        loop = asyncio.get_running_loop()
        interrupted = False

        def interrupt() -> None:
            nonlocal interrupted
            interrupted = True
            main_task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, interrupt)
        console = self.console
        console.event(intro)
        try:
            try:
                await stack.start()
                await story()
            finally:
                console.close()
                console.event("Stopping the activator, the scaler and the cluster")
                await asyncio.shield(stack.stop())
        except asyncio.CancelledError:
            if not interrupted:
                raise
            console.event("interrupted")
            return None
        except (OSError, RuntimeError, TimeoutError, aiohttp.ClientError) as exc:
            failure = f"the sandbox failed: {exc}"
            console.event(f"tidal demo: {failure}")
            return failure
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        return ""

    def finish(self, problems: Sequence[str], figures: Mapping[str, object]) -> int:
        """Name the logs after a problem, print ``figures`` as the JSON line with
        ``--json``; the exit code."""
        if problems:
            print(f"logs are in {self.directory / 'logs'}", file=self.human, flush=True)
        if self.json:
            print(json.dumps(dict(figures)), flush=True)
        return 1 if problems else 0
