"""Locust users for Tidal's load tests: OpenAI-compatible streaming and not, and Triton.

Run it as its own process (importing locust patches the process with gevent)::

    locust -f loadtests/locustfile.py --headless --host http://ACTIVATOR:8080 \\
        --shape spike --csv out/run --csv-full-history OpenAIStreamingUser

User classes (name the ones to run on the command line; open-loop shapes pick
:class:`OpenLoopUser` themselves):

- :class:`OpenAIStreamingUser`: ``/v1/chat/completions`` (or
  ``/v1/completions`` with ``--endpoint completions``) with ``stream=true``.
  Locust times a stream to its response headers, which is neither time to
  first token nor the end of the answer, so this user times the stream
  itself (:mod:`loadtests.streaming`): the request's own entry gets the
  end-to-end time, and two more entries of request type ``TTFT`` (time to
  first token) and ``TPOT`` (time per output token after the first) carry
  those figures under the same name. They are left out of locust's
  "Aggregated" row, which counts requests only.
- :class:`OpenAINonStreamingUser`: the same request with ``stream=false``; its
  entry is the end-to-end time.
- :class:`TritonUser`: KServe v2 ``POST /v2/models/{model}/infer`` with JSON
  tensors.
- :class:`OpenLoopUser`: the streaming request, sent when an open-loop
  schedule (``--shape diurnal`` or ``replay``) says, with every time measured
  from the *scheduled* send time (see :mod:`loadtests.schedules`).

Output length is exact (``max_tokens`` with ``ignore_eos``) and checked
against the server's usage count, unless ``--no-output-length-check``.
Settings are locust options with environment variables (``TIDAL_MODEL``,
``TIDAL_PROMPT_TOKENS``…), defined in ``_add_arguments`` below and, for the
shapes, in :mod:`loadtests.shapes` (locust's ``--help`` does not list a
locustfile's own options; its web UI does). With ``--csv PREFIX`` the
users also write ``PREFIX_requests.csv``, one row per request and per
TTFT/TPOT figure, which :mod:`loadtests.report` reads.

The streaming users use locust's ``HttpUser`` (requests), not
``FastHttpUser``: requests hands each HTTP chunk over as it arrives, which is
what a token timing needs; LLM request rates are low enough that the slower
client does not matter. Users stopped mid-request (the end of a spike, the
end of the test) finish it first: ``--stop-timeout`` defaults to the request
timeout here, since a killed request is silently lost from the statistics.
"""

from __future__ import annotations

import csv
import logging
import random
import time
from typing import Any, TextIO

from locust import FastHttpUser, HttpUser, task
from locust import events as _locust_events
from locust.env import Environment
from requests.exceptions import RequestException

from loadtests import payloads, shapes
from loadtests.schedules import ScheduledRequest
from loadtests.shapes import TidalShape
from loadtests.streaming import SseParser, StreamMeter

__all__ = [
    "OpenAINonStreamingUser",
    "OpenAIStreamingUser",
    "OpenLoopUser",
    "TidalShape",
    "TritonUser",
]

logger = logging.getLogger("tidal.locustfile")

# Locust's event hooks are untyped; one Any-typed handle keeps the rest strict.
events: Any = _locust_events

TTFT = "TTFT"
TPOT = "TPOT"


def _options(environment: Environment) -> Any:
    """Locust's parsed options, with our flags on them (set before any user runs)."""
    options = environment.parsed_options
    if options is None:
        raise RuntimeError("the Tidal users need locust's parsed command-line options")
    return options


def _add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("Tidal requests (loadtests/locustfile.py)")
    group.add_argument(
        "--model",
        default="llama-3-8b",
        env_var="TIDAL_MODEL",
        help="model name sent in requests (default llama-3-8b)",
    )
    group.add_argument(
        "--endpoint",
        choices=["chat", "completions"],
        default="chat",
        env_var="TIDAL_ENDPOINT",
        help="/v1/chat/completions or /v1/completions (default chat)",
    )
    group.add_argument(
        "--prompt-tokens",
        type=int,
        default=512,
        env_var="TIDAL_PROMPT_TOKENS",
        help="prompt length in tokens, approximate for text (default 512)",
    )
    group.add_argument(
        "--output-tokens",
        type=int,
        default=128,
        env_var="TIDAL_OUTPUT_TOKENS",
        help="output length in tokens, exact (default 128)",
    )
    group.add_argument(
        "--prompt-token-ids",
        action="store_true",
        env_var="TIDAL_PROMPT_TOKEN_IDS",
        help="completions: send the prompt as token ids (exact length)",
    )
    group.add_argument(
        "--no-output-length-check",
        action="store_true",
        env_var="TIDAL_NO_OUTPUT_LENGTH_CHECK",
        help="do not fail a request whose usage count differs from --output-tokens",
    )
    group.add_argument(
        "--request-timeout-s",
        type=float,
        default=900.0,
        env_var="TIDAL_REQUEST_TIMEOUT_S",
        help="seconds a request may take, cold start included (default 900)",
    )
    group.add_argument(
        "--think-time-s",
        type=float,
        default=0.0,
        env_var="TIDAL_THINK_TIME_S",
        help="closed-loop users: pause between requests (default 0)",
    )
    group.add_argument(
        "--target-header",
        default="",
        env_var="TIDAL_TARGET",
        help="send X-Tidal-Target: NAMESPACE/NAME (activator --allow-target-header)",
    )
    group.add_argument(
        "--triton-model",
        default="",
        env_var="TIDAL_TRITON_MODEL",
        help="Triton model name (default: --model)",
    )
    group.add_argument(
        "--triton-input",
        default="text_input",
        env_var="TIDAL_TRITON_INPUT",
        help="Triton BYTES input tensor for the prompt (default text_input)",
    )
    group.add_argument(
        "--request-log",
        default="",
        env_var="TIDAL_REQUEST_LOG",
        help="CSV with one row per request and per TTFT/TPOT figure "
        "(default: PREFIX_requests.csv with --csv PREFIX)",
    )
    group.add_argument(
        "--triton-max-tokens-input",
        default="max_tokens",
        env_var="TIDAL_TRITON_MAX_TOKENS_INPUT",
        help="Triton INT32 input for the output length; empty: none",
    )


REQUEST_LOG_COLUMNS = ("origin_unix_s", "type", "name", "response_time_s", "ok", "error")


class _RequestLog:
    """Every request, and every TTFT/TPOT figure, as it was measured.

    Locust's stats history gives only sliding-window percentiles that start
    late and drop the first requests of a run (the very ones held through a
    cold start), so the report computes its percentiles from this log. Rows
    carry the request's origin (sent, or due for open loop) in Unix seconds,
    so the report can place each latency at the moment its request began.
    """

    def __init__(self, handle: TextIO) -> None:
        self._handle = handle
        self._writer = csv.writer(handle)
        self._writer.writerow(REQUEST_LOG_COLUMNS)

    def on_request(
        self,
        request_type: str,
        name: str,
        response_time: float | None,
        exception: BaseException | None,
        context: dict[str, Any] | None = None,
        **_kwargs: Any,
    ) -> None:
        response_time_s = (response_time or 0.0) / 1000
        origin = (context or {}).get("origin_unix_s")
        origin_s = origin if isinstance(origin, float) else time.time() - response_time_s
        error = "" if exception is None else str(exception)[:300]
        self._writer.writerow(
            [
                f"{origin_s:.4f}",
                request_type,
                name,
                f"{response_time_s:.6f}",
                int(exception is None),
                error,
            ]
        )

    def close(self, **_kwargs: Any) -> None:
        self._handle.close()


def _keep_figures_out_of_the_total(stats: Any) -> None:
    """Count TTFT and TPOT figures in their own entries only, not in the total.

    They are timings of a streamed request, not requests: in locust's
    "Aggregated" row (the console table, ``_stats.csv``, the history and the
    web UI's totals) they would triple the request count and the rate, and
    mix token timings into the request latency percentiles.
    """
    log_request = stats.log_request

    def log(method: str, name: str, response_time: float, content_length: int) -> None:
        if method in (TTFT, TPOT):
            stats.entries[(name, method)].log(response_time, content_length)
        else:
            log_request(method, name, response_time, content_length)

    stats.log_request = log


def _on_init(environment: Environment, **_kwargs: Any) -> None:
    _keep_figures_out_of_the_total(environment.stats)
    options: Any = environment.parsed_options
    if options is None:
        return
    path = options.request_log or (
        f"{options.csv_prefix}_requests.csv" if options.csv_prefix else ""
    )
    if path:
        log = _RequestLog(open(path, "w", newline="", buffering=1))  # noqa: SIM115 (closed on quit)
        hooks: Any = environment.events
        hooks.request.add_listener(log.on_request)
        hooks.quitting.add_listener(log.close)
    for user_class in (OpenAINonStreamingUser, TritonUser):
        user_class.network_timeout = options.request_timeout_s
        user_class.connection_timeout = options.request_timeout_s
    if not environment.stop_timeout:
        environment.stop_timeout = options.request_timeout_s
        logger.info(
            "--stop-timeout set to %.0f s so that stopped users finish their request",
            options.request_timeout_s,
        )


events.init_command_line_parser.add_listener(_add_arguments)
events.init.add_listener(_on_init)


def _headers(options: Any) -> dict[str, str]:
    headers = {"Accept": "text/event-stream, application/json"}
    if options.target_header:
        headers["X-Tidal-Target"] = options.target_header
    return headers


def _openai_body(
    options: Any, *, prompt_tokens: int, output_tokens: int, stream: bool, rng: random.Random
) -> tuple[str, dict[str, Any]]:
    endpoint: payloads.Endpoint = options.endpoint
    if endpoint == "chat":
        body = payloads.chat_body(
            model=options.model,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            stream=stream,
            rng=rng,
        )
    else:
        body = payloads.completion_body(
            model=options.model,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            stream=stream,
            rng=rng,
            token_ids=options.prompt_token_ids,
        )
    return payloads.endpoint_path(endpoint), body


def _status_error(response: Any) -> str:
    error = getattr(response, "error", None)
    if response.status_code == 0 and error is not None:
        return f"no response: {error}"
    try:
        text = response.text or ""
    except Exception as read_error:  # the body itself may fail to arrive
        text = f"(body unreadable: {read_error})"
    return f"HTTP {response.status_code}: {text[:300]}"


def _json_answer(response: Any) -> tuple[bool, Any]:
    """(True, the body's JSON) of a 200; else marks the entry failed and gives (False, None)."""
    if response.status_code != 200:
        response.failure(_status_error(response))
        return False, None
    try:
        return True, response.json()
    except ValueError:
        response.failure(f"response is not JSON: {(response.text or '')[:200]!r}")
        return False, None


class _StreamingMixin:
    """The streamed request, timed from a given origin (see the module docstring)."""

    environment: Environment
    client: Any

    def stream_completion(self, *, prompt_tokens: int, output_tokens: int, origin_s: float) -> None:
        options = _options(self.environment)
        path, body = _openai_body(
            options,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            stream=True,
            rng=random.Random(),
        )
        name = f"{path} stream"
        # The same origin on the wall clock, for the request log.
        context = {"origin_unix_s": time.time() - (time.perf_counter() - origin_s)}
        meter = StreamMeter(
            origin_s=origin_s,
            expected_output_tokens=None if options.no_output_length_check else output_tokens,
        )
        received = 0
        timeout = options.request_timeout_s
        with self.client.post(
            path,
            json=body,
            headers=_headers(options),
            name=name,
            stream=True,
            catch_response=True,
            timeout=(timeout, timeout),
        ) as response:
            if response.status_code != 200:
                meter.fail(_status_error(response))
            else:
                parser = SseParser()
                try:
                    # chunk_size=None: each chunk as the server flushed it.
                    for chunk in response.iter_content(chunk_size=None):
                        now_s = time.perf_counter()
                        received += len(chunk)
                        for data in parser.feed(chunk):
                            meter.event(data, now_s=now_s)
                    for data in parser.close():
                        meter.event(data, now_s=time.perf_counter())
                except RequestException as error:
                    meter.fail(f"stream broken after {received} bytes: {error!r}")
            outcome = meter.finish(now_s=time.perf_counter())
            # The entry's own time becomes the end-to-end time (locust's is to the headers).
            response.request_meta["response_time"] = outcome.e2e_s * 1000
            response.request_meta["response_length"] = received
            response.request_meta["context"] = {**response.request_meta["context"], **context}
            if outcome.error is not None:
                response.failure(outcome.error)
                return
            response.success()
        hooks: Any = self.environment.events
        fire = hooks.request.fire
        if outcome.ttft_s is not None:
            fire(
                request_type=TTFT,
                name=name,
                response_time=outcome.ttft_s * 1000,
                response_length=0,
                exception=None,
                context=context,
            )
        if outcome.tpot_s is not None:
            fire(
                request_type=TPOT,
                name=name,
                response_time=outcome.tpot_s * 1000,
                response_length=outcome.output_tokens,
                exception=None,
                context=context,
            )


def _think_time(user: Any) -> float:
    return float(_options(user.environment).think_time_s)


class OpenAIStreamingUser(_StreamingMixin, HttpUser):
    """Closed loop: a streamed completion, then the next (after ``--think-time-s``)."""

    wait_time = _think_time

    @task
    def completion(self) -> None:
        options = _options(self.environment)
        self.stream_completion(
            prompt_tokens=options.prompt_tokens,
            output_tokens=options.output_tokens,
            origin_s=time.perf_counter(),
        )


class OpenAINonStreamingUser(FastHttpUser):
    """Closed loop: a whole completion in one response; the entry is the end-to-end time."""

    wait_time = _think_time

    @task
    def completion(self) -> None:
        options = _options(self.environment)
        path, body = _openai_body(
            options,
            prompt_tokens=options.prompt_tokens,
            output_tokens=options.output_tokens,
            stream=False,
            rng=random.Random(),
        )
        with self.client.post(
            path, json=body, headers=_headers(options), name=path, catch_response=True
        ) as response:
            ok, answer = _json_answer(response)
            if not ok:
                return
            if not isinstance(answer, dict) or not answer.get("choices"):
                response.failure(f"response has no choices: {str(answer)[:200]}")
                return
            usage = answer.get("usage") or {}
            got = usage.get("completion_tokens")
            exact = not options.no_output_length_check and isinstance(got, int)
            if exact and got != options.output_tokens:
                response.failure(
                    f"asked for exactly {options.output_tokens} output tokens "
                    f"(max_tokens with ignore_eos), got {got}"
                )
                return
            response.success()


class TritonUser(FastHttpUser):
    """Closed loop: KServe v2 inference with JSON tensors (``POST /v2/models/{m}/infer``)."""

    wait_time = _think_time

    @task
    def infer(self) -> None:
        options = _options(self.environment)
        model = options.triton_model or options.model
        path = f"/v2/models/{model}/infer"
        body = payloads.triton_body(
            prompt_tokens=options.prompt_tokens,
            output_tokens=options.output_tokens,
            rng=random.Random(),
            text_input=options.triton_input,
            max_tokens_input=options.triton_max_tokens_input,
        )
        with self.client.post(
            path, json=body, headers=_headers(options), name=path, catch_response=True
        ) as response:
            ok, answer = _json_answer(response)
            if not ok:
                return
            if not isinstance(answer, dict) or not isinstance(answer.get("outputs"), list):
                response.failure(f"KServe v2 response has no outputs: {str(answer)[:200]}")
                return
            response.success()


class OpenLoopUser(_StreamingMixin, HttpUser):
    """Sends the open-loop schedule's requests on time; see :mod:`loadtests.schedules`.

    Each user claims the next request, sleeps until it is due, sends it and
    reports back; latency is measured from the due time, so a request sent
    late because every user was busy shows its lateness as latency instead of
    hiding it.
    """

    open_loop = True

    def wait_time(self) -> float:
        return 0.0

    @task
    def next_request(self) -> None:
        schedule = shapes.open_loop_schedule()
        if schedule is None:
            logger.error("OpenLoopUser runs only under an open-loop shape (--shape diurnal|replay)")
            time.sleep(1.0)
            return
        request: ScheduledRequest | None = schedule.claim()
        if request is None:
            time.sleep(0.2)  # all handed out; the shape ends the test when all are answered
            return
        # time.sleep is gevent's here (locust monkey-patches), so waiting yields.
        delay_s = request.due_s - time.perf_counter()
        if delay_s > 0:
            time.sleep(delay_s)
        sent_at_s = time.perf_counter()
        try:
            self.stream_completion(
                prompt_tokens=max(request.prompt_tokens, 1),
                output_tokens=max(request.output_tokens, 1),
                origin_s=request.due_s,
            )
        finally:
            schedule.finish(request, sent_at_s=sent_at_s)
