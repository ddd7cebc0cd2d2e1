"""Drive the pure performance models of ``simulator.engine`` in real time.

One asyncio task per server runs the engine loop: plan a step, sleep for its
duration, apply it, hand each produced token to the request that owns it.
Main decision: the loop is the only timer. A request does not sleep per token;
it holds a :class:`TokenStream` whose counter the loop advances and which it
awaits, so one step with 500 running sequences costs one sleep and 500 counter
increments, not 500 timers. That is what lets one process stream to hundreds
of clients on one core.

Time: the models run on *model time*, ``(loop.time() - start) * speedup``.
``speedup`` > 1 makes everything proportionally faster (tests use it so a
realistic 2-second generation takes 20 ms). Durations reported to the outside
(metrics) are wall-clock, as an observer measures them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

from simulator.engine import BatcherParams, DynamicBatcher, LlmEngine, LlmParams

# How far (wall seconds) the engine loop may lag behind model time and still
# keep steps back to back; beyond that the model's clock jumps to now.
CATCH_UP_WALL_S = 0.02

__all__ = ["BatchRuntime", "BatchTicket", "LlmObserver", "LlmRuntime", "ModelClock", "TokenStream"]


class ModelClock:
    """Model time from the event loop's clock, scaled by ``speedup``."""

    def __init__(self, speedup: float = 1.0) -> None:
        if not speedup > 0:
            raise ValueError(f"speedup must be > 0; got {speedup!r}")
        self.speedup = speedup
        self._loop = asyncio.get_running_loop()
        self._origin = self._loop.time()

    def now(self) -> float:
        return (self._loop.time() - self._origin) * self.speedup

    def wall(self) -> float:
        return self._loop.time()

    def to_wall_s(self, model_s: float) -> float:
        return model_s / self.speedup


class TokenStream:
    """One request's progress through the engine, awaited by its HTTP handler."""

    __slots__ = (
        "_waiter",
        "arrival_wall",
        "done",
        "emitted",
        "first_token_wall",
        "output_tokens",
        "prompt_tokens",
        "request_id",
    )

    def __init__(
        self, request_id: int, *, prompt_tokens: int, output_tokens: int, arrival_wall: float
    ) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.arrival_wall = arrival_wall
        self.emitted = 0
        self.done = False
        self.first_token_wall: float | None = None
        self._waiter: asyncio.Future[None] | None = None

    async def wait_beyond(self, seen: int) -> None:
        """Return once more than ``seen`` tokens were emitted, or the request is done."""
        while self.emitted <= seen and not self.done:
            waiter = asyncio.get_running_loop().create_future()
            self._waiter = waiter
            try:
                await waiter
            finally:
                self._waiter = None

    def wake(self) -> None:
        """Tokens were emitted (or the request ended): the reader waiting in
        :meth:`wait_beyond` looks again."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class LlmObserver(Protocol):
    """What the runtime reports as it goes (the vLLM metrics implement it)."""

    def first_token(self, stream: TokenStream, ttft_s: float) -> None: ...

    def tokens(self, count: int) -> None: ...

    def finished(self, stream: TokenStream, e2e_s: float) -> None: ...


class _EngineLoop:
    """One background task that runs a model's steps; started and stopped with the server."""

    _loop_name = "engine-loop"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self._loop_name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        raise NotImplementedError


class LlmRuntime(_EngineLoop):
    """A running continuous-batching engine: submit requests, await their tokens."""

    _loop_name = "llm-engine-loop"

    def __init__(
        self,
        params: LlmParams,
        *,
        speedup: float = 1.0,
        observer: LlmObserver | None = None,
    ) -> None:
        super().__init__()
        self.engine = LlmEngine(params)
        self.clock = ModelClock(speedup)
        self._observer = observer
        self._streams: dict[int, TokenStream] = {}
        self._ids = itertools.count(1)
        self._work = asyncio.Event()

    @property
    def in_flight(self) -> int:
        return len(self._streams)

    def busy_time_s(self) -> float:
        return self.engine.busy_time_s(self.clock.now())

    def submit(
        self, *, prompt_tokens: int, output_tokens: int, prefix: Sequence[Hashable] = ()
    ) -> TokenStream:
        """``prefix``: the prompt's block hashes, for the engine's prefix cache (empty: none)."""
        rid = next(self._ids)
        self.engine.add(
            rid,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            now=self.clock.now(),
            prefix=prefix,
        )
        stream = TokenStream(
            rid,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            arrival_wall=self.clock.wall(),
        )
        self._streams[rid] = stream
        self._work.set()
        return stream

    def cancel(self, stream: TokenStream) -> None:
        """The client went away: free the request's place in the engine."""
        if self._streams.pop(stream.request_id, None) is not None:
            self.engine.abort(stream.request_id)

    async def _run(self) -> None:
        engine, clock = self.engine, self.clock
        # Back-to-back steps start where the previous one ended in model time, so
        # our own CPU time between steps (handing out tokens) does not stretch the
        # GPU timeline; only when we fall further behind than this does it slip.
        slack_s = CATCH_UP_WALL_S * clock.speedup
        last_end: float | None = None
        while True:
            if not engine.has_work:
                last_end = None
                self._work.clear()
                await self._work.wait()
                continue
            now = clock.now()
            start = last_end if last_end is not None and now - last_end <= slack_s else now
            plan = engine.begin_step(start)
            if plan is None:  # only queued work that cannot start yet; wait for a change
                last_end = None
                self._work.clear()
                await self._work.wait()
                continue
            await asyncio.sleep(max(0.0, clock.to_wall_s(plan.end_s - clock.now())))
            last_end = plan.end_s
            self._deliver(engine.end_step().emitted)

    def _deliver(self, emitted: tuple[int, ...]) -> None:
        streams = self._streams
        observer = self._observer
        wall = self.clock.wall()
        for rid in emitted:
            stream = streams.get(rid)
            if stream is None:
                continue
            stream.emitted += 1
            if stream.emitted == 1:
                stream.first_token_wall = wall
                if observer is not None:
                    observer.first_token(stream, wall - stream.arrival_wall)
            if stream.emitted >= stream.output_tokens:
                stream.done = True
                del streams[rid]
                if observer is not None:
                    observer.finished(stream, wall - stream.arrival_wall)
            stream.wake()
        if observer is not None and emitted:
            observer.tokens(len(emitted))


@dataclass(slots=True)
class BatchTicket:
    """One inference request waiting on the dynamic batcher."""

    request_id: int
    items: int
    future: asyncio.Future[tuple[float, float]]  # (queue wall s, compute wall s)


class BatchRuntime(_EngineLoop):
    """A running dynamic batcher (the Triton-like server's model)."""

    _loop_name = "batcher-loop"

    def __init__(
        self,
        params: BatcherParams,
        *,
        speedup: float = 1.0,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__()
        self.batcher = DynamicBatcher(params)
        self.clock = ModelClock(speedup)
        self._on_batch = on_batch
        self._tickets: dict[int, BatchTicket] = {}
        self._ids = itertools.count(1)
        self._work = asyncio.Event()

    @property
    def pending(self) -> int:
        return self.batcher.pending

    def busy_time_s(self) -> float:
        return self.batcher.busy_time_s(self.clock.now())

    async def infer(self, items: int) -> tuple[float, float]:
        """Queue ``items`` inferences; (queue, compute) wall seconds once executed."""
        rid = next(self._ids)
        self.batcher.add(rid, items=items, now=self.clock.now())
        future: asyncio.Future[tuple[float, float]] = asyncio.get_running_loop().create_future()
        self._tickets[rid] = BatchTicket(rid, items, future)
        self._work.set()
        # A cancelled caller's request still executes (Triton does not abort a
        # queued request when its client leaves); its result is dropped.
        return await future

    async def _run(self) -> None:
        batcher, clock = self.batcher, self.clock
        while True:
            plan = batcher.begin_batch(clock.now())
            if plan is None:
                self._work.clear()
                await self._work.wait()
                continue
            await asyncio.sleep(clock.to_wall_s(plan.end_s - plan.start_s))
            outcome = batcher.end_batch()
            if self._on_batch is not None:
                self._on_batch(outcome.items)
            for rid, (queue_s, compute_s) in outcome.done.items():
                ticket = self._tickets.pop(rid)
                if not ticket.future.done():
                    ticket.future.set_result((clock.to_wall_s(queue_s), clock.to_wall_s(compute_s)))
