"""A world's event loop: each event handed to its owner, and the replicas' engines stepped.

:class:`World` builds a world's parts and runs its agenda
(:mod:`simulator.world.agenda`) to the end: an arrival goes to the
activator's hold (:mod:`simulator.world.hold`), a replica's events to the
fleet (:mod:`simulator.world.fleet`), the tick to the control loop
(:mod:`simulator.world.control`), and an engine's step ending is handled
here: its first tokens and finished requests go to the requests' rows
(:mod:`simulator.world.requests`) and the second's counts
(:mod:`simulator.world.signals`), and the engine is stepped on.

Main decision: **an engine is stepped from one batch change to the next**,
and a request that reaches a replica whose engine is in the middle of a
jump cuts the jump where the step engine would have admitted it: at the
first step boundary after now, or at now itself when what is handled now
comes before steps ending at the same instant (a replica turning ready).
The tokens of a jump's steps that have ended by a tick count in that
tick's second, as the step engine's would. The run ends at the first tick
after the last arrival (or at ``until_s``, if later) once every request is
answered, so every policy's run on a trace ends at the same time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from simulator import progress
from simulator.traces import TraceRequest
from simulator.world.agenda import (
    ARRIVAL,
    KILL,
    MARKET,
    NOTICE,
    READY,
    STEP_END,
    TICK,
    Agenda,
)
from simulator.world.config import WorldConfig
from simulator.world.control import Control
from simulator.world.fleet import Fleet, Replica
from simulator.world.hold import Hold
from simulator.world.plugins import Autoscaler
from simulator.world.requests import Requests
from simulator.world.result import RunResult
from simulator.world.signals import Signals
from simulator.world.spot_market import SpotMarket

__all__ = ["World", "run_world"]

# Simulated seconds between two reports to the progress bar.
_PROGRESS_EVERY = 300


def run_world(
    requests: Iterable[TraceRequest],
    autoscaler: Autoscaler,
    config: WorldConfig | None = None,
    *,
    until_s: float | None = None,
) -> RunResult:
    """Replay ``requests`` (sorted by offset) against ``autoscaler`` (the package docstring).

    The run ends at the first tick after the last arrival (or at ``until_s``,
    if later) once every request is answered. ``requests`` is read once, as
    a stream: only requests held or in flight are kept, and per request
    only the packed columns of the result, so a trace of millions runs in
    flat memory.
    """
    return World(requests, autoscaler, config or WorldConfig()).run(until_s)


class World:
    """One model's world: its parts, wired, and the loop that runs its events."""

    def __init__(
        self, requests: Iterable[TraceRequest], autoscaler: Autoscaler, config: WorldConfig
    ) -> None:
        self.config = config
        self._pending = iter(requests)
        self._last_offset = -math.inf
        self.agenda = Agenda()
        self.requests = Requests()
        self.spot = SpotMarket(config.spot, seed=config.seed, agenda=self.agenda)
        self.fleet = Fleet(
            config,
            agenda=self.agenda,
            spot=self.spot,
            dispatch=self._release_held,
            lose=self.requests.lose,
            emitted=self._emitted,
        )
        self.hold = Hold(
            config, agenda=self.agenda, requests=self.requests, fleet=self.fleet, send=self._send
        )
        self.signals = Signals(
            agenda=self.agenda, requests=self.requests, hold=self.hold, fleet=self.fleet
        )
        self.control = Control(autoscaler, fleet=self.fleet, signals=self.signals)
        self._integral = 0.0  # of the open requests over time, since the last tick
        self._unreported = (0, 0)  # ticks and arrivals not yet told to the progress bar

    # The fleet's calls back, to parts built after it.
    def _release_held(self) -> None:
        self.hold.dispatch()

    def _emitted(self, tokens: int, shape: str) -> None:
        self.signals.emitted(tokens, shape)

    # --- the loop ---------------------------------------------------------------------------

    def _next_arrival(self) -> bool:
        """Schedule the trace's next request (the stream is read one ahead); False: none left."""
        request = next(self._pending, None)
        if request is None:
            return False
        if request.offset_s < self._last_offset:
            raise ValueError(
                f"requests must come in time order: one at {request.offset_s} s follows one at "
                f"{self._last_offset} s"
            )
        self._last_offset = request.offset_s
        self.agenda.push(request.offset_s, ARRIVAL, 0, request)
        return True

    def run(self, until_s: float | None) -> RunResult:
        if not self._next_arrival():
            raise ValueError("a simulation needs at least one request")
        horizon = math.inf
        agenda, fleet, requests = self.agenda, self.fleet, self.requests
        # The zones' spot state is drawn before the warm start, so that warm
        # spot replicas go only to zones that have spot at time 0.
        self.spot.open()
        self.control.start()
        agenda.push(0.0, TICK, 0)
        while agenda:
            was = agenda.now
            at_s, kind, key, payload = agenda.pop()
            if at_s > was:
                self._integral += requests.outstanding * (at_s - was)
            if kind == STEP_END:
                self._step_end(*payload)  # type: ignore[misc]
            elif kind == ARRIVAL:
                if not self._next_arrival() and horizon == math.inf:
                    horizon = max(math.floor(self._last_offset) + 1.0, until_s or 0.0)
                self._arrive(payload)  # type: ignore[arg-type]
            elif kind == TICK:
                self._tick()
                if at_s >= horizon and requests.outstanding == 0:
                    break  # every policy's run ends at the same time once all is answered
                agenda.push(at_s + 1.0, TICK, 0)
            elif kind == READY:
                fleet.ready(payload)  # type: ignore[arg-type]
            elif kind == NOTICE:
                fleet.notice(payload)  # type: ignore[arg-type]
            elif kind == KILL:
                fleet.kill(payload)  # type: ignore[arg-type]
            elif kind == MARKET:
                fleet.market(key)
        end_s = agenda.now
        for replica in list(fleet.replicas):
            fleet.end(replica)
        progress.advance(*self._unreported)
        return self._result(end_s)

    def _result(self, end_s: float) -> RunResult:
        requests, fleet = self.requests, self.fleet
        return RunResult(
            name=self.control.autoscaler.name,
            arrival_s=requests.arrival_s,
            first_token_s=requests.first_token,
            finished_s=requests.finished,
            output_tokens=requests.outputs,
            failed_reason=requests.failed,
            cold_start_wait_s=tuple(self.hold.cold_waits),
            cold_starts=fleet.cold_starts,
            replicas=tuple(fleet.lives),
            timeline=tuple(self.signals.timeline),
            end_s=end_s,
            preemptions=fleet.preemptions,
            priority=tuple(requests.priorities or ()),
            tenant=tuple(requests.tenants or ()),
        )

    def _arrive(self, r: TraceRequest) -> None:
        i = self.requests.record(r)
        self.signals.arrived(r)
        if self.hold.admit(i, r) and self.fleet.target == 0:
            # Held at zero: the activator pokes the autoscaler at once.
            self.control.decide(activation=True, concurrency=float(self.requests.outstanding))

    def _tick(self) -> None:
        concurrency = self._integral  # over the last second (ticks are 1 s apart)
        now = self.agenda.now
        # Steps that ended by now inside a jump count as the step engine's would.
        for replica in self.fleet.replicas:
            if replica.engine.in_step:
                self.signals.emitted(replica.engine.settle(now), replica.shape)
        self.hold.expire()
        self.fleet.notice_from_trace()
        self.control.decide(activation=False, concurrency=concurrency)
        arrivals = self.signals.close_second(concurrency)
        ticks, reported = self._unreported
        self._unreported = (ticks + 1, reported + arrivals)
        if ticks + 1 >= _PROGRESS_EVERY:
            progress.advance(*self._unreported)
            self._unreported = (0, 0)
        self._integral = 0.0

    # --- the engines --------------------------------------------------------------------------

    def _send(self, i: int, replica: Replica) -> None:
        """Request ``i`` reaches ``replica`` (vLLM refuses it there if too long)."""
        requests, agenda = self.requests, self.agenda
        if not replica.take(i, requests.live[i], agenda.now):
            # vLLM answers at once with a 400: the prompt leaves no room for a token.
            requests.fail(i, "context-length")
            return
        requests.reached(i, agenda.now)
        engine = replica.engine
        if not engine.in_step:
            self._begin_step(replica)
            return
        # Steps in flight: the engine ends them where it would admit this request
        # (at once for a step boundary now, when what is handled now comes first).
        end = engine.cut(agenda.now, inclusive=agenda.kind < STEP_END)
        if end is not None:
            agenda.push(end, STEP_END, replica.rid, (replica, engine.plan_no))

    def _begin_step(self, replica: Replica) -> None:
        end = replica.engine.begin_step(self.agenda.now)
        if end is not None:
            self.agenda.push(end, STEP_END, replica.rid, (replica, replica.engine.plan_no))

    def _step_end(self, replica: Replica, plan_no: int) -> None:
        engine = replica.engine
        if replica.ended_s is not None or engine.plan_no != plan_no:
            return  # killed mid-step (spot removal), or the steps were cut short since
        outcome = engine.end_step()
        requests, signals, shape = self.requests, self.signals, replica.shape
        for i in outcome.first:
            took = requests.first_token_at(i, outcome.end_s)
            signals.first_token(requests.live[i].prompt_tokens, took, shape)
        signals.emitted(outcome.tokens, shape)
        if outcome.finished:
            requests.finish(outcome.finished, outcome.end_s)
            replica.finished(outcome.finished)
        if engine.has_work:
            self._begin_step(replica)
        elif replica.draining and replica.in_flight == 0:
            self.fleet.end(replica)
        if outcome.finished and self.config.container_concurrency > 0 and len(self.hold):
            self.hold.dispatch()
