"""Load schedules: how many users, or which request when, at each moment of a test.

This is the pure half of the load-test shapes (``loadtests/shapes.py`` is the
thin locust half). Nothing here imports locust, which monkey-patches the
process with gevent on import, so these schedules are tested (and reused by
the policy simulator) in a plain process. Every method takes the time as an
argument; none reads a clock.

Two kinds of schedule:

- **Closed loop** (:class:`ConstantUsers`, :class:`StepUsers`,
  :class:`SpikeFromZero`): a number of users, each sending its next request
  when the previous one is answered. Right for "N concurrent clients", such
  as a spike of users arriving at an idle model.
- **Open loop** (:class:`OpenLoopSchedule`, fed by a trace or by
  :func:`diurnal_arrivals`): requests are sent at times fixed in advance,
  whatever the latency. A closed-loop user that waits two minutes for a cold
  start sends nothing in those two minutes, so the requests that a real
  population would have sent meanwhile are never made and never measured:
  the queue the system would have built is hidden (coordinated omission).
  Open loop keeps sending on schedule, and latency is measured from the
  *scheduled* send time, so even a load generator that falls behind cannot
  hide queueing: its own lateness is counted as latency.

:class:`Tick` is what a locust shape returns (users and spawn rate); ``None``
ends the test.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from loadtests.traces import TraceRequest

__all__ = [
    "ConstantUsers",
    "OpenLoopSchedule",
    "Schedule",
    "ScheduleError",
    "ScheduledRequest",
    "SpikeFromZero",
    "StepUsers",
    "Tick",
    "diurnal_arrivals",
    "diurnal_rate",
    "user_class_problem",
    "users_needed",
]

# The shapes whose requests follow a schedule of send times, not a pool of users.
OPEN_LOOP_SHAPES = ("diurnal", "replay")


class ScheduleError(ValueError):
    """A schedule parameter is out of range; the message names it and what is allowed."""


def user_class_problem(
    shape: str, chosen: dict[str, bool], available: dict[str, bool]
) -> str | None:
    """Why the user classes ``chosen`` cannot run ``shape``, or None when one of them can.

    ``chosen`` and ``available`` map class names to whether the class is open
    loop (``open_loop = True``): those named on the command line (all when
    none is) and all the locustfile holds. An open-loop shape needs an
    open-loop class and a closed-loop shape a closed-loop one; the message
    names the classes that would do.
    """
    open_loop = shape in OPEN_LOOP_SHAPES
    if any(flag == open_loop for flag in chosen.values()):
        return None
    fitting = sorted(name for name, flag in available.items() if flag == open_loop)
    kind = "open loop (a schedule of send times)" if open_loop else "closed loop (a pool of users)"
    named = ", ".join(sorted(chosen)) or "none"
    if not fitting:
        return f"--shape {shape} is {kind}, and the locustfile has no user class for it"
    runs = (
        f"the user class {fitting[0]}"
        if len(fitting) == 1
        else f"one of the user classes {', '.join(fitting[:-1])} or {fitting[-1]}"
    )
    return (
        f"--shape {shape} is {kind} and runs {runs}; name it on the command line instead of {named}"
    )


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ScheduleError(message)


@dataclass(frozen=True, slots=True)
class Tick:
    """Users to run now, and how fast to start or stop them (users per second)."""

    users: int
    spawn_rate: float


class Schedule(Protocol):
    """What a shape asks once a second: the target now, or ``None`` to end the test."""

    def tick(self, elapsed_s: float, running_users: int) -> Tick | None: ...


@dataclass(frozen=True, slots=True)
class ConstantUsers:
    """``users`` users for ``duration_s`` (forever when ``None``): locust's ``-u/-r/-t``."""

    users: int
    spawn_rate: float
    duration_s: float | None = None

    def __post_init__(self) -> None:
        _require(self.users >= 0, f"users must be >= 0, got {self.users}")
        _require(self.spawn_rate > 0, f"spawn rate must be > 0 users/s, got {self.spawn_rate}")
        _require(
            self.duration_s is None or self.duration_s > 0,
            f"duration must be > 0 s or unset, got {self.duration_s}",
        )

    def tick(self, elapsed_s: float, running_users: int) -> Tick | None:
        if self.duration_s is not None and elapsed_s >= self.duration_s:
            return None
        return Tick(self.users, self.spawn_rate)


@dataclass(frozen=True, slots=True)
class StepUsers:
    """Staircase: ``start_users``, then ``step_users`` more every ``step_s``, ``steps`` steps.

    The test lasts ``steps * step_s``; the last step is held for a full ``step_s``.
    """

    start_users: int
    step_users: int
    step_s: float
    steps: int
    spawn_rate: float

    def __post_init__(self) -> None:
        _require(self.start_users >= 0, f"start users must be >= 0, got {self.start_users}")
        _require(self.step_users >= 0, f"users per step must be >= 0, got {self.step_users}")
        _require(self.step_s > 0, f"step duration must be > 0 s, got {self.step_s}")
        _require(self.steps >= 1, f"steps must be >= 1, got {self.steps}")
        _require(self.spawn_rate > 0, f"spawn rate must be > 0 users/s, got {self.spawn_rate}")

    def tick(self, elapsed_s: float, running_users: int) -> Tick | None:
        step = int(elapsed_s // self.step_s)
        if step >= self.steps:
            return None
        return Tick(self.start_users + step * self.step_users, self.spawn_rate)


class SpikeFromZero:
    """Idle, a sudden spike of users, then idle long enough to watch scale to zero.

    Phases: ``idle_before_s`` with no user (the model should be at zero);
    ``spike_users`` users started at once for ``spike_s``; then no user
    again. The closing idle phase is timed from the moment the last user has
    actually stopped: users finish the request they are in (a request held
    through a cold start can take minutes), and a tail that started while
    they drained would leave less time than asked for to see scale to zero.
    """

    def __init__(
        self,
        *,
        idle_before_s: float,
        spike_users: int,
        spike_s: float,
        idle_after_s: float,
        spawn_rate: float | None = None,
    ) -> None:
        _require(idle_before_s >= 0, f"idle before the spike must be >= 0 s, got {idle_before_s}")
        _require(spike_users >= 1, f"spike users must be >= 1, got {spike_users}")
        _require(spike_s > 0, f"spike duration must be > 0 s, got {spike_s}")
        _require(idle_after_s >= 0, f"idle after the spike must be >= 0 s, got {idle_after_s}")
        # Default: every spike user within one second, which is what "sudden" means.
        rate = float(spike_users) if spawn_rate is None else spawn_rate
        _require(rate > 0, f"spawn rate must be > 0 users/s, got {spawn_rate}")
        self.idle_before_s = idle_before_s
        self.spike_users = spike_users
        self.spike_s = spike_s
        self.idle_after_s = idle_after_s
        self.spawn_rate = rate
        self._idle_after_from_s: float | None = None

    @property
    def spike_end_s(self) -> float:
        return self.idle_before_s + self.spike_s

    def phase(self, elapsed_s: float) -> str:
        """``idle-before``, ``spike``, ``draining``, ``idle-after`` or ``done`` (for logs)."""
        if elapsed_s < self.idle_before_s:
            return "idle-before"
        if elapsed_s < self.spike_end_s:
            return "spike"
        if self._idle_after_from_s is None:
            return "draining"
        if elapsed_s - self._idle_after_from_s < self.idle_after_s:
            return "idle-after"
        return "done"

    def tick(self, elapsed_s: float, running_users: int) -> Tick | None:
        if elapsed_s < self.idle_before_s:
            return Tick(0, self.spawn_rate)
        if elapsed_s < self.spike_end_s:
            return Tick(self.spike_users, self.spawn_rate)
        if self._idle_after_from_s is None:
            if running_users > 0:
                return Tick(0, self.spawn_rate)
            self._idle_after_from_s = elapsed_s
        if elapsed_s - self._idle_after_from_s < self.idle_after_s:
            return Tick(0, self.spawn_rate)
        return None


def diurnal_rate(t_s: float, *, peak_rps: float, peak_to_trough: float, day_s: float) -> float:
    """Arrival rate at ``t_s`` of a compressed day: trough at 0 (night), peak at ``day_s / 2``.

    A raised cosine between ``peak_rps / peak_to_trough`` and ``peak_rps``;
    smooth, so a scaler sees a slow swell and ebb rather than steps.
    """
    trough = peak_rps / peak_to_trough
    phase = (1 - math.cos(2 * math.pi * t_s / day_s)) / 2
    return trough + (peak_rps - trough) * phase


def diurnal_arrivals(
    *,
    peak_rps: float,
    peak_to_trough: float = 10.0,
    day_s: float,
    days: float = 1.0,
    prompt_tokens: int,
    output_tokens: int,
    seed: int = 0,
) -> list[TraceRequest]:
    """Poisson arrivals whose rate follows :func:`diurnal_rate`, as trace records.

    The default ratio, 10, is the weekday peak over the night trough of code
    services in the Azure LLM trace 2024 (chat is nearer 2 to 2.5). Drawn by
    thinning a Poisson process at the peak rate, with a seeded generator, so
    a run is reproducible.
    """
    _require(peak_rps > 0, f"peak rate must be > 0 requests/s, got {peak_rps}")
    _require(peak_to_trough >= 1, f"peak/trough ratio must be >= 1, got {peak_to_trough}")
    _require(day_s > 0, f"day length must be > 0 s, got {day_s}")
    _require(days > 0, f"days must be > 0, got {days}")
    _require(prompt_tokens >= 1, f"prompt tokens must be >= 1, got {prompt_tokens}")
    _require(output_tokens >= 1, f"output tokens must be >= 1, got {output_tokens}")
    rng = random.Random(seed)
    end_s = day_s * days
    t_s = 0.0
    records: list[TraceRequest] = []
    while True:
        t_s += rng.expovariate(peak_rps)
        if t_s >= end_s:
            return records
        rate = diurnal_rate(t_s, peak_rps=peak_rps, peak_to_trough=peak_to_trough, day_s=day_s)
        if rng.random() * peak_rps < rate:
            records.append(TraceRequest(t_s, prompt_tokens, output_tokens))


def users_needed(records: Sequence[TraceRequest], *, latency_s: float) -> int:
    """Most requests in flight at once if each took ``latency_s``: the open-loop pool size.

    An open-loop user sends one request at a time, so the pool must hold a
    user for every request in flight, or sends fall behind schedule.
    """
    _require(latency_s > 0, f"assumed latency must be > 0 s, got {latency_s}")
    most = 0
    oldest = 0
    for i, record in enumerate(records):
        while records[oldest].offset_s + latency_s <= record.offset_s:
            oldest += 1
        most = max(most, i - oldest + 1)
    return most


@dataclass(frozen=True, slots=True)
class ScheduledRequest:
    """One request of an open-loop schedule, with its send time on the caller's clock."""

    index: int
    due_s: float
    prompt_tokens: int
    output_tokens: int


class OpenLoopSchedule:
    """Hands out requests in trace order, each with the time it must be sent.

    A pool of ``users`` open-loop users claims requests one by one; each user
    waits until its request's ``due_s``, sends it, measures latency from
    ``due_s``, and reports back with :meth:`finish`. The first request is
    due ``lead_in_s`` after ``origin_s``, which leaves time to start the pool.

    The test ends once every request has been claimed and answered, or
    ``drain_timeout_s`` after the last one was due, whichever is first.

    Safe to share between greenlets: claim and finish do not yield.
    """

    def __init__(
        self,
        records: Sequence[TraceRequest],
        *,
        origin_s: float,
        users: int,
        lead_in_s: float = 2.0,
        drain_timeout_s: float = 600.0,
        late_after_s: float = 1.0,
    ) -> None:
        _require(len(records) > 0, "an open-loop schedule needs at least one request")
        _require(users >= 1, f"open-loop users must be >= 1, got {users}")
        _require(lead_in_s >= 0, f"lead-in must be >= 0 s, got {lead_in_s}")
        _require(drain_timeout_s > 0, f"drain timeout must be > 0 s, got {drain_timeout_s}")
        self._records = list(records)
        self.origin_s = origin_s
        self.users = users
        self.lead_in_s = lead_in_s
        self.drain_timeout_s = drain_timeout_s
        self.late_after_s = late_after_s
        self._next = 0
        self.in_flight = 0
        self.finished = 0
        self.late_sends = 0
        self.max_lag_s = 0.0

    @property
    def total(self) -> int:
        return len(self._records)

    @property
    def exhausted(self) -> bool:
        return self._next >= len(self._records)

    @property
    def last_due_s(self) -> float:
        return self.origin_s + self.lead_in_s + self._records[-1].offset_s

    def claim(self) -> ScheduledRequest | None:
        """The next request to send, or ``None`` once all are handed out."""
        if self.exhausted:
            return None
        index = self._next
        self._next += 1
        self.in_flight += 1
        record = self._records[index]
        return ScheduledRequest(
            index=index,
            due_s=self.origin_s + self.lead_in_s + record.offset_s,
            prompt_tokens=record.prompt_tokens,
            output_tokens=record.output_tokens,
        )

    def finish(self, request: ScheduledRequest, *, sent_at_s: float) -> None:
        """Record that ``request`` was sent at ``sent_at_s`` and has ended."""
        self.in_flight -= 1
        self.finished += 1
        lag_s = sent_at_s - request.due_s
        self.max_lag_s = max(self.max_lag_s, lag_s)
        if lag_s > self.late_after_s:
            self.late_sends += 1

    def tick(self, elapsed_s: float, running_users: int) -> Tick | None:
        # ``elapsed_s`` is on the same clock as ``origin_s``, measured from it.
        done = self.exhausted and self.in_flight == 0
        overdue = self.origin_s + elapsed_s > self.last_due_s + self.drain_timeout_s
        if done or overdue:
            return None
        # The whole pool at once: it exists to be waiting when requests fall due.
        return Tick(self.users, float(self.users))
