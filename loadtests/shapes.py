"""Locust load shapes: step, spike-from-zero, diurnal and open-loop trace replay.

A thin locust layer over :mod:`loadtests.schedules`, where the schedules
themselves live and are tested without locust. Importing this module imports
locust (and so gevent's monkey-patching): only locust processes import it.

One shape class, :class:`TidalShape`, is exposed to locust (locust runs the
first shape class it finds in a locustfile, so a locustfile must not hold
several); ``--shape`` (or ``TIDAL_SHAPE``) picks the schedule when the test
starts:

- ``constant`` (default): locust's own ``-u``, ``-r`` and ``-t``;
- ``step``: a staircase of users (``--step-*``);
- ``spike``: idle, a sudden spike of users, then idle again long enough to see
  scale to zero, timed from when the last user stopped (``--spike-*``);
- ``diurnal``: a day compressed into minutes, open loop, Poisson arrivals
  whose rate swings between a trough and a peak ``--diurnal-ratio`` times
  higher (default 10, as code services show) (``--diurnal-*``);
- ``replay``: open-loop replay of a trace (``code``, ``conv`` or a file): send
  times, prompt and output lengths from the trace, a window of it
  (``--trace-start-s``, ``--trace-duration-s``) played ``--trace-compression``
  times faster.

Closed-loop shapes run the locustfile's closed-loop user classes (the ones
named on the command line, or all of them); open-loop shapes run its
open-loop class (``open_loop = True``: the locustfile's ``OpenLoopUser``), a
pool of users sized to the busiest moment of the schedule; user classes that
cannot run the shape are refused before the test starts, naming the one
that can. Why open loop, and why latency is measured from the
scheduled send time: see :mod:`loadtests.schedules` (coordinated omission).

Open-loop shapes need the shape and the users in one process (no
``--processes``, no master/worker split): the schedule is shared in memory.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, ClassVar

from locust import LoadTestShape
from locust import events as _locust_events
from locust.runners import LocalRunner

from loadtests import traces
from loadtests.schedules import (
    ConstantUsers,
    OpenLoopSchedule,
    Schedule,
    ScheduleError,
    SpikeFromZero,
    StepUsers,
    diurnal_arrivals,
    user_class_problem,
    users_needed,
)

__all__ = ["SHAPES", "TidalShape", "build_schedule", "open_loop_schedule"]

logger = logging.getLogger("tidal.shapes")

# Locust's event hooks are untyped; one Any-typed handle keeps the rest strict.
events: Any = _locust_events

SHAPES = ("constant", "step", "spike", "diurnal", "replay")

# The open-loop schedule of the running test, shared with the open-loop users
# of the same process (see the module docstring).
_active_open_loop: OpenLoopSchedule | None = None


def open_loop_schedule() -> OpenLoopSchedule | None:
    """The running test's open-loop schedule, if its shape is open loop."""
    return _active_open_loop


def _add_shape_arguments(parser: Any) -> None:
    group = parser.add_argument_group("Tidal load shapes (loadtests/shapes.py)")
    group.add_argument(
        "--shape",
        choices=SHAPES,
        default="constant",
        env_var="TIDAL_SHAPE",
        help="load shape; 'constant' uses -u/-r/-t (default: constant)",
    )
    for flag, kind, default, text in _SHAPE_FLAGS:
        env = "TIDAL_" + flag.removeprefix("--").replace("-", "_").upper()
        group.add_argument(flag, type=kind, default=default, env_var=env, help=text)


_SHAPE_FLAGS: list[tuple[str, Any, Any, str]] = [
    ("--step-start-users", int, 1, "step: users in the first step (default 1)"),
    ("--step-users", int, 5, "step: users added per step (default 5)"),
    ("--step-s", float, 60.0, "step: seconds per step (default 60)"),
    ("--steps", int, 5, "step: number of steps (default 5)"),
    ("--spike-idle-before-s", float, 30.0, "spike: idle seconds before the spike (default 30)"),
    ("--spike-users", int, 20, "spike: users started at once (default 20)"),
    ("--spike-s", float, 60.0, "spike: seconds the spike lasts (default 60)"),
    (
        "--spike-idle-after-s",
        float,
        360.0,
        "spike: idle seconds after the last user stopped; longer than the "
        "scale-to-zero grace period (default 360)",
    ),
    ("--diurnal-peak-rps", float, 5.0, "diurnal: peak requests/s (default 5)"),
    ("--diurnal-ratio", float, 10.0, "diurnal: peak over trough rate (default 10)"),
    ("--diurnal-day-s", float, 600.0, "diurnal: seconds one compressed day lasts (default 600)"),
    ("--diurnal-days", float, 1.0, "diurnal: days to run (default 1)"),
    ("--diurnal-seed", int, 0, "diurnal: random seed of the arrivals (default 0)"),
    ("--trace", str, "code", "replay: trace path, file name or short name (default code)"),
    ("--trace-start-s", float, 0.0, "replay: window start, trace seconds (default 0)"),
    ("--trace-duration-s", float, 0.0, "replay: window length, trace seconds; 0: to the end"),
    ("--trace-compression", float, 1.0, "replay: trace seconds played per second (default 1)"),
    ("--open-loop-users", int, 0, "open loop: user pool size; 0 sizes it from the schedule"),
    (
        "--open-loop-assumed-latency-s",
        float,
        30.0,
        "open loop: request latency assumed when sizing the pool (default 30)",
    ),
    ("--open-loop-max-users", int, 1000, "open loop: largest pool when sized (default 1000)"),
    ("--open-loop-lead-in-s", float, 2.0, "open loop: seconds before the first send (default 2)"),
    (
        "--drain-timeout-s",
        float,
        600.0,
        "open loop: most seconds to wait for answers after the last send (default 600)",
    ),
]


events.init_command_line_parser.add_listener(_add_shape_arguments)


def _check_user_classes(environment: Any, **_kwargs: Any) -> None:
    """Refuse, before the test starts, user classes that cannot run ``--shape``.

    Found later, in the shape's first tick, it was a traceback from a
    greenlet; here it is one line naming the class to use, and exit status 2.
    """
    options = environment.parsed_options
    if options is None or getattr(options, "shape", None) is None:
        return

    def loops(classes: Any) -> dict[str, bool]:
        return {c.__name__: bool(getattr(c, "open_loop", False)) for c in classes}

    available = loops((environment.available_user_classes or {}).values())
    problem = user_class_problem(options.shape, loops(environment.user_classes), available)
    if problem is not None:
        logger.error("%s", problem)
        sys.exit(2)


events.init.add_listener(_check_user_classes)


def build_schedule(options: Any, *, origin_s: float) -> Schedule:
    """The schedule ``options`` (locust's parsed options) ask for; ``origin_s`` is time 0."""
    global _active_open_loop
    _active_open_loop = None
    shape = options.shape
    if shape == "constant":
        return ConstantUsers(
            users=options.num_users if options.num_users is not None else 1,
            spawn_rate=options.spawn_rate if options.spawn_rate else 1.0,
            duration_s=options.run_time or None,
        )
    if shape == "step":
        return StepUsers(
            start_users=options.step_start_users,
            step_users=options.step_users,
            step_s=options.step_s,
            steps=options.steps,
            spawn_rate=options.spawn_rate if options.spawn_rate else 10.0,
        )
    if shape == "spike":
        return SpikeFromZero(
            idle_before_s=options.spike_idle_before_s,
            spike_users=options.spike_users,
            spike_s=options.spike_s,
            idle_after_s=options.spike_idle_after_s,
        )
    if shape == "diurnal":
        records = diurnal_arrivals(
            peak_rps=options.diurnal_peak_rps,
            peak_to_trough=options.diurnal_ratio,
            day_s=options.diurnal_day_s,
            days=options.diurnal_days,
            prompt_tokens=getattr(options, "prompt_tokens", 512),
            output_tokens=getattr(options, "output_tokens", 128),
            seed=options.diurnal_seed,
        )
    elif shape == "replay":
        path = traces.find_trace(options.trace)
        records = traces.prepare(
            traces.read_trace(path),
            start_s=options.trace_start_s,
            duration_s=options.trace_duration_s or None,
            compression=options.trace_compression,
        )
        if not records:
            raise ScheduleError(
                f"the window start={options.trace_start_s}s "
                f"duration={options.trace_duration_s or 'to the end'}s of {path} has no request"
            )
        summary = traces.summarize(records)
        logger.info(
            "replaying %s: %d requests over %.0f s (%.0f/min), median prompt %d, output %d tokens",
            path.name,
            summary.requests,
            summary.duration_s,
            summary.requests_per_min,
            summary.median_prompt_tokens,
            summary.median_output_tokens,
        )
    else:
        raise ScheduleError(f"unknown shape {shape!r}; allowed: {', '.join(SHAPES)}")
    users = options.open_loop_users or max(
        1,
        min(
            users_needed(records, latency_s=options.open_loop_assumed_latency_s),
            options.open_loop_max_users,
        ),
    )
    _active_open_loop = OpenLoopSchedule(
        records,
        origin_s=origin_s,
        users=users,
        lead_in_s=options.open_loop_lead_in_s,
        drain_timeout_s=options.drain_timeout_s,
    )
    logger.info("open loop: %d requests, a pool of %d users", len(records), users)
    return _active_open_loop


class TidalShape(LoadTestShape):
    """The shape ``--shape`` names; see the module docstring."""

    use_common_options: ClassVar[bool] = True  # 'constant' reads -u, -r and -t

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._schedule: Schedule | None = None
        self._user_classes: list[type[Any]] = []
        self._last_phase = ""

    def reset_time(self) -> None:
        super().reset_time()  # type: ignore[no-untyped-call]
        self._schedule = None  # a restarted test starts its schedule afresh

    def tick(self) -> tuple[int, float, list[type[Any]]] | None:
        runner = self.runner
        if runner is None:
            return None
        if self._schedule is None:
            options: Any = runner.environment.parsed_options
            self._schedule = build_schedule(options, origin_s=self.start_time)
            open_loop = isinstance(self._schedule, OpenLoopSchedule)
            if open_loop and not isinstance(runner, LocalRunner):
                raise ScheduleError(
                    f"--shape {options.shape} is open loop and needs a single locust process; "
                    "drop --processes / --master / --worker"
                )
            # Checked at init (_check_user_classes): at least one fits.
            self._user_classes = [
                c for c in runner.user_classes if bool(getattr(c, "open_loop", False)) == open_loop
            ]
        elapsed_s = time.perf_counter() - self.start_time  # as get_run_time(), typed
        target = self._schedule.tick(elapsed_s, runner.user_count)
        if isinstance(self._schedule, SpikeFromZero):
            phase = self._schedule.phase(elapsed_s)
            if phase != self._last_phase:
                logger.info("spike-from-zero: %s at %.1f s", phase, elapsed_s)
                self._last_phase = phase
        if target is None:
            if isinstance(self._schedule, OpenLoopSchedule):
                s = self._schedule
                logger.info(
                    "open loop done: %d of %d requests answered, %d in flight, "
                    "%d sent more than %.1f s late (worst %.2f s)",
                    s.finished,
                    s.total,
                    s.in_flight,
                    s.late_sends,
                    s.late_after_s,
                    s.max_lag_s,
                )
            return None
        return target.users, target.spawn_rate, self._user_classes
