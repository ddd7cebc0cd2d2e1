"""``tidal demo``: watch a model wake from zero, scale out under a burst, and go back to zero.

Starts a :class:`~loadtests.sandbox.stack.SandboxStack` (the emulated
cluster, ``tidal scaler`` and ``tidal activator`` as real processes) with the
example fake-vLLM Deployment at zero replicas and short cold starts, windows
and grace period, then tells a four-part story through the activator:

1. **idle**: a few seconds at zero replicas, nothing running;
2. **wake**: one streaming chat completion; the activator holds it (its
   ``requests_buffered`` gauge shows it) and asks the scaler to wake the
   model; it is answered once the first replica is ready, and its TTFT,
   measured by the client, is about the cold start;
3. **burst**: many concurrent streams for a while, well above the per-replica
   target concurrency, so the scaler scales out to more than one replica;
4. **idle**: no traffic until the scaler takes the model back to zero and the
   last pod is gone.

Everything reported is observed, never assumed: replica counts
are sampled from the cluster's store (``spec.replicas``,
``status.readyReplicas``, the pods that exist), held and in-flight counts
from the activator's ``/metrics``, latencies on the client's clock;
:mod:`loadtests.demo.observe` turns the samples into the summary and its
verdict. ``--json`` prints that summary as one line of JSON on stdout, and
everything a person reads (the story, the table) on stderr, so
``tidal demo --json | jq`` works. The exit status is 1 unless no request
failed, a cold start was seen, more than one replica was ready at peak and
none was left at the end.

The summary also measures every request against a time-to-first-token
objective (``--slo-ttft``, 2 s by default) and shows the share that met it:
the requests held through the cold start are the misses a user would see.
It is written, with a chart of the same run (load, TTFT, replicas:
:mod:`loadtests.demo.chart`), under ``--dir``'s ``demo/``, and the summary
names both paths.

Main sizing decision: the burst runs ``--burst-concurrency`` closed-loop
streams (default 16) against a target concurrency of 4 per replica, so the
scaler asks for four replicas and gets ``max-scale`` (3): even on a loaded
two-core machine, where the client keeps fewer streams open than it tries
to, the concurrency seen stays far above the two-replica threshold, and the
burst lasts long enough (20 s) for several cold starts of 4 s to finish.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import uvloop

from loadtests.demo.activator_gauges import HeldRequests, read_gauges
from loadtests.demo.chart import render_svg
from loadtests.demo.client import stream_chat
from loadtests.demo.observe import ClusterSample, DemoTracker, RequestResult
from loadtests.demo.session import INTERRUPTED, DemoSession
from loadtests.demo.spot_story import configure_spot
from loadtests.demo.view import (
    COLD_START_NOTE,
    Console,
    Status,
    cold_start_rows,
    summary_table,
)
from loadtests.sandbox.directory import add_dir_flag
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.example_flags import add_model_flags, duration_arg, model_from_args
from loadtests.sandbox.stack import SandboxStack, StackSettings

__all__ = ["DEMO_MODEL", "DemoRun", "Story", "configure", "run"]

# Short enough that the story fits in about a minute and a half, long enough
# that each phase is visible: a 4 s cold start, the shortest window allowed,
# and 8 s of idle before zero.
DEMO_MODEL = ExampleModel(
    startup_delay_s=4.0,
    window_s=6.0,
    scale_down_delay_s=2.0,
    grace_s=8.0,
    target_concurrency=4,
    max_scale=3,
    cold_start_timeout_s=120.0,
)

RECENT_TTFT_S = 5.0  # the live TTFT is the median of requests that ended this recently


@dataclass(frozen=True, slots=True)
class Story:
    idle_s: float = 4.0
    burst_concurrency: int = 16
    burst_s: float = 20.0
    max_tokens: int = 64
    zero_timeout_s: float = 120.0
    sample_interval_s: float = 0.5
    # The time-to-first-token objective the summary measures the requests against.
    slo_ttft_s: float = 2.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as one line of JSON on stdout (the rest goes to stderr)",
    )
    add_dir_flag(parser, "sandbox directory: kubeconfig, logs, and the demo's summary and chart")
    parser.add_argument(
        "--story",
        choices=("scale", "warm", "spot", "lora", "inferencepool"),
        default="scale",
        help="scale: from zero, a burst, back to zero (default); "
        "warm: a wake from sleep beside a cold start (docs/warm-tier.md); "
        "spot: a spot preemption under streaming load, covered by on-demand (docs/placement.md); "
        "lora: ten LoRA adapters on two replicas, loaded on demand, unloaded when idle "
        "(docs/adapters.md); "
        "inferencepool: an InferencePool woken from zero through its endpoint picker and "
        "scaled under load, no activator (docs/gateway-api.md)",
    )
    story = parser.add_argument_group("the story")
    defaults = Story()
    story.add_argument(
        "--idle-s",
        type=float,
        metavar="SECONDS",
        default=defaults.idle_s,
        help=f"seconds at zero before the first request (default {defaults.idle_s:g})",
    )
    story.add_argument(
        "--burst-concurrency",
        type=int,
        metavar="N",
        default=defaults.burst_concurrency,
        help=f"concurrent streams during the burst (default {defaults.burst_concurrency})",
    )
    story.add_argument(
        "--burst-s",
        type=float,
        metavar="SECONDS",
        default=defaults.burst_s,
        help=f"seconds the burst lasts (default {defaults.burst_s:g})",
    )
    story.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        default=defaults.max_tokens,
        help=f"output tokens per request (default {defaults.max_tokens})",
    )
    story.add_argument(
        "--zero-timeout-s",
        type=float,
        metavar="SECONDS",
        default=defaults.zero_timeout_s,
        help="most seconds to wait for the return to zero after the burst "
        f"(default {defaults.zero_timeout_s:g})",
    )
    story.add_argument(
        "--slo-ttft",
        type=duration_arg,
        metavar="DURATION",
        default=defaults.slo_ttft_s,
        help="time-to-first-token objective the summary measures every request against, "
        f"on the client's clock (default {defaults.slo_ttft_s:g}s)",
    )
    add_model_flags(parser, DEMO_MODEL)
    configure_spot(parser)


def _story_from_args(args: argparse.Namespace) -> Story:
    story = Story(
        idle_s=args.idle_s,
        burst_concurrency=args.burst_concurrency,
        burst_s=args.burst_s,
        max_tokens=args.max_tokens,
        zero_timeout_s=args.zero_timeout_s,
        slo_ttft_s=args.slo_ttft,
    )
    for name in ("idle_s", "burst_s", "zero_timeout_s"):
        if getattr(story, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be 0 or more")
    if story.burst_concurrency < 1:
        raise ValueError("--burst-concurrency must be 1 or more")
    if story.max_tokens < 1:
        raise ValueError("--max-tokens must be 1 or more")
    if not story.slo_ttft_s > 0:
        raise ValueError("--slo-ttft must be a duration above 0, such as 2s")
    return story


class DemoRun:
    """One run of the story against a started stack; samples, events and results."""

    def __init__(
        self, stack: SandboxStack, model: ExampleModel, story: Story, console: Console
    ) -> None:
        self.stack = stack
        self.model = model
        self.story = story
        self.console = console
        self.tracker = DemoTracker()
        self.t0 = time.monotonic()
        self.phase = "start"
        self.note = ""
        self.held: HeldRequests | None = None
        self._last: ClusterSample | None = None
        self._woke_at: float | None = None
        self.cold_start_s: float | None = None
        self.first_result: RequestResult | None = None
        self.zero_after_s: float | None = None
        self._metrics_session: aiohttp.ClientSession | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def event(self, text: str) -> None:
        self.console.event(f"[{self.elapsed():6.1f}s] {text}")

    # --- observation -----------------------------------------------------------

    async def sample_once(self) -> ClusterSample:
        assert self._metrics_session is not None
        desired, ready, pods = self.stack.deployment_state(self.model.name, self.model.namespace)
        self.held = await read_gauges(
            self._metrics_session, self.stack.activator_admin_url, self.model.target
        )
        sample = ClusterSample(
            at_s=self.elapsed(),
            desired=desired,
            ready=ready,
            pods=pods,
            buffered=self.held.buffered if self.held else 0,
            in_flight=self.held.in_flight if self.held else 0,
        )
        self._narrate(self._last, sample)
        self._last = sample
        self.tracker.sample(sample)
        return sample

    def _narrate(self, before: ClusterSample | None, now: ClusterSample) -> None:
        if before is None:
            return
        if now.desired != before.desired:
            self.event(f"scaler: desired replicas {before.desired} -> {now.desired}")
            if before.desired == 0:
                self._woke_at = now.at_s
        if now.ready != before.ready:
            text = f"ready replicas {before.ready} -> {now.ready}"
            if before.ready == 0 and self._woke_at is not None:
                # readyReplicas trails the pod's readiness probe and the
                # Deployment controller; the activator probes pods itself, so
                # the held request may already be answered.
                self.cold_start_s = now.at_s - self._woke_at
                text += (
                    f" (the Deployment's status, {self.cold_start_s:.1f}s after the wake; "
                    "the activator probes pods itself and may forward sooner)"
                )
            self.event(text)
        if now.pods == 0 and before.pods > 0:
            self.event("no pod left: nothing runs on the GPUs")

    def status(self) -> Status:
        last = self._last
        now = self.elapsed()
        recent = [
            r.ttft_s
            for r in self.tracker.results
            if r.ok and r.ttft_s is not None and now - (r.started_s + r.total_s) <= RECENT_TTFT_S
        ]
        return Status(
            elapsed_s=now,
            phase=self.phase,
            desired=last.desired if last else 0,
            ready=last.ready if last else 0,
            pods=last.pods if last else 0,
            buffered=self.held.buffered if self.held else None,
            in_flight=self.held.in_flight if self.held else None,
            done=sum(1 for r in self.tracker.results if r.ok),
            failed=sum(1 for r in self.tracker.results if not r.ok),
            recent_ttft_s=statistics.median(recent) if recent else None,
            note=self.note,
        )

    async def _sample_forever(self) -> None:
        while True:
            await self.sample_once()
            await asyncio.sleep(self.story.sample_interval_s)

    async def _show_forever(self) -> None:
        # A terminal gets a smooth redraw; a log gets one line a second.
        period_s = 0.25 if self.console.tty else 1.0
        while True:
            await asyncio.sleep(period_s)
            self.console.status(self.status())

    # --- the story -------------------------------------------------------------

    async def play(self) -> None:
        timeout = aiohttp.ClientTimeout(total=3.0)
        async with contextlib.AsyncExitStack() as exits:
            self._metrics_session = await exits.enter_async_context(
                aiohttp.ClientSession(timeout=timeout)
            )
            # No connection cap (aiohttp's default is 100 per session), and no
            # total timeout: a held request legitimately waits a cold start.
            client = await exits.enter_async_context(
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=0),
                    timeout=aiohttp.ClientTimeout(
                        total=None, sock_connect=10.0, sock_read=self.model.cold_start_timeout_s
                    ),
                )
            )
            await self.sample_once()
            tasks = [
                asyncio.create_task(self._sample_forever(), name="demo-sampler"),
                asyncio.create_task(self._show_forever(), name="demo-view"),
            ]
            try:
                await self._idle()
                await self._wake(client)
                await self._burst(client)
                await self._back_to_zero()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self.console.close()
            # The last word on the replicas, taken after the story ended.
            await self.sample_once()

    async def _idle(self) -> None:
        self.phase = "idle"
        self.event(
            f"1/4 idle: {self.model.target} is at zero replicas, no GPU in use "
            f"({self.story.idle_s:g}s)"
        )
        await asyncio.sleep(self.story.idle_s)

    async def _wake(self, client: aiohttp.ClientSession) -> None:
        self.phase = "wake"
        self.event(
            f"2/4 wake: one streaming chat completion for {self.model.model!r} through the "
            f"activator; the model needs {self.model.startup_delay_s:g}s to load"
        )
        started = self.elapsed()
        request = asyncio.create_task(self._request(client), name="demo-wake")
        while not request.done():
            self.note = f"first request held {self.elapsed() - started:.1f}s"
            await asyncio.wait([request], timeout=0.25)
        self.note = ""
        result = request.result()
        self.first_result = result
        if result.ok:
            self.event(
                f"first request answered: TTFT {result.ttft_s or 0:.2f}s (held by the activator "
                f"while the model woke), done in {result.total_s:.2f}s"
            )
        else:
            self.event(f"first request FAILED: HTTP {result.status} {result.error}")

    async def _burst(self, client: aiohttp.ClientSession) -> None:
        self.phase = "burst"
        n = self.story.burst_concurrency
        self.event(
            f"3/4 burst: {n} concurrent streams for {self.story.burst_s:g}s "
            f"(target {self.model.target_concurrency} per replica, max {self.model.max_scale})"
        )
        deadline = time.monotonic() + self.story.burst_s
        before = len(self.tracker.results)

        async def stream() -> None:
            while time.monotonic() < deadline:
                result = await self._request(client)
                if not result.ok:
                    await asyncio.sleep(0.2)  # a failing activator is not hammered

        self.note = f"{n} streams"
        await asyncio.gather(*(stream() for _ in range(n)))
        self.note = ""
        done = self.tracker.results[before:]
        self.event(
            f"burst over: {len(done)} requests, {sum(1 for r in done if not r.ok)} failed, "
            f"peak ready replicas {max((s.ready for s in self.tracker.samples), default=0)}"
        )

    async def _request(self, client: aiohttp.ClientSession) -> RequestResult:
        result = await stream_chat(
            client,
            self.stack.activator_url,
            model=self.model.model,
            max_tokens=self.story.max_tokens,
            clock_start_s=self.t0,
        )
        self.tracker.result(result)
        return result

    async def _back_to_zero(self) -> None:
        self.phase = "cooldown"
        self.event(
            "4/4 idle: no traffic; the scaler scales in, then to zero after "
            f"{self.model.grace_s:g}s of idle (grace period)"
        )
        started = self.elapsed()
        self.note = "waiting for zero"
        deadline = time.monotonic() + self.story.zero_timeout_s
        while time.monotonic() < deadline:
            last = self._last
            if last is not None and last.desired == last.ready == last.pods == 0:
                self.zero_after_s = self.elapsed() - started
                self.event(f"back at zero, {self.zero_after_s:.1f}s after the burst")
                break
            await asyncio.sleep(0.25)
        else:
            self.event(f"still not at zero after {self.story.zero_timeout_s:g}s; giving up")
        self.note = ""


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def _main(args: argparse.Namespace) -> int:
    try:
        model = model_from_args(args, DEMO_MODEL)
        story = _story_from_args(args)
    except ValueError as exc:
        print(f"tidal demo: {exc}", file=sys.stderr)
        return 2
    session = DemoSession.open(args)
    console = session.console
    stack = SandboxStack(session.directory, StackSettings(example=model))
    run: DemoRun | None = None

    async def play() -> None:
        nonlocal run
        console.event(
            f"Up in {session.elapsed():.1f}s: activator {stack.activator_url}, "
            f"scaler {stack.scaler_url}; Deployment {model.target} at zero replicas"
        )
        run = DemoRun(stack, model, story, console)
        await run.play()

    failure = await session.play(
        stack,
        "Starting the sandbox: an emulated Kubernetes cluster, tidal scaler and tidal "
        f"activator (in {session.directory})",
        play,
    )
    if failure is None:
        return INTERRUPTED
    wall_s = session.elapsed()
    tracker = run.tracker if run is not None else DemoTracker()
    summary = tracker.summary(slo_ttft_s=story.slo_ttft_s)
    problems = summary.problems() + ([failure] if failure else [])
    first = run.first_result if run is not None else None
    cold_start_s = run.cold_start_s if run is not None else None
    zero_after_s = run.zero_after_s if run is not None else None
    extra = [
        *cold_start_rows(first.ttft_s if first else None, cold_start_s),
        ("burst -> zero", _fmt(zero_after_s)),
        ("wall time", _fmt(wall_s)),
    ]
    table = summary_table(summary, extra=extra, problems=problems, notes=[COLD_START_NOTE])
    summary_path, chart_path = write_outputs(session.directory, table, tracker, story.slo_ttft_s)
    print(
        f"{table}\nSummary: {summary_path}\nChart (load, TTFT, replicas): {chart_path}",
        file=session.human,
        flush=True,
    )
    figures: dict[str, object] = dict(summary.as_json())
    figures["chart"] = str(chart_path)
    figures.update(
        first_ttft_s=_round(first.ttft_s if first else None),
        cold_start_s=_round(cold_start_s),
        zero_after_s=_round(zero_after_s),
        wall_s=_round(wall_s),
    )
    if failure:
        figures["error"] = failure
    return session.finish(problems, figures)


def write_outputs(
    directory: Path, table: str, tracker: DemoTracker, slo_ttft_s: float
) -> tuple[Path, Path]:
    """Write the summary and its chart under ``directory/demo``; their paths."""
    out = directory / "demo"
    out.mkdir(parents=True, exist_ok=True)
    summary_path, chart_path = out / "summary.txt", out / "chart.svg"
    summary_path.write_text(table + "\n")
    chart_path.write_text(
        render_svg(
            tracker.samples,
            tracker.results,
            slo_ttft_s=slo_ttft_s,
            title="tidal demo: a model woken from zero, a burst, back to zero",
        )
    )
    return summary_path, chart_path


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def run(args: argparse.Namespace) -> int:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        story = getattr(args, "story", "scale")
        if story == "warm":
            from loadtests.demo.warm_story import warm_main

            return runner.run(warm_main(args))
        if story == "lora":
            from loadtests.demo.lora_story import lora_main

            return runner.run(lora_main(args))
        if story == "spot":
            from loadtests.demo.spot_story import run_spot

            return runner.run(run_spot(args))
        if story == "inferencepool":
            from loadtests.demo.pool_story import pool_main

            return runner.run(pool_main(args))
        return runner.run(_main(args))
