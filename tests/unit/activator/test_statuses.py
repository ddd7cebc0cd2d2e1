"""The activator's own answers, decided without an HTTP library.

Covers: after a failed exchange with a replica, a client body failure is
the answer whether or not bytes went out; a failure before any byte goes
back to waiting; one after bytes is a 502 naming the replica; every row of
the table is a JSON error in the OpenAI shape, 503s with Retry-After (but
``not_woken`` and ``lora_unsupported``); a refusal to wake carries the scaler's reason; the
metrics' reasons are the table's codes; each answer's reason phrase is the
standard one; the held-body cap counts, refuses past the cap (0: no cap)
and rejects a negative cap.
"""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest

from activator.holding.gate import BufferFull, ColdStartTimeout, GateClosed, Shed
from activator.holding.held_bodies import HeldBodies
from activator.http1.heads import error_head_and_body
from activator.metrics import REASONS
from activator.proxy import error_response
from activator.scaler_link.wake_refusal import NotWoken
from activator.statuses import (
    ERROR_STATUS,
    AllRefused,
    BadModel,
    BodyNotObject,
    BodyStalled,
    BodyTooLarge,
    ConnectRefused,
    Draining,
    Failure,
    InvalidJson,
    NoTarget,
    RefusedRequest,
    UpstreamFailed,
    after_failure,
    error_document,
    status_of,
)


@pytest.mark.parametrize("failure", list(Failure))
@pytest.mark.parametrize("client_body", [BodyStalled(), BodyTooLarge()])
def test_a_client_body_failure_is_the_answer(
    failure: Failure, client_body: BodyStalled | BodyTooLarge
) -> None:
    answer = after_failure(failure, client_body=client_body, replica="pod-1", what="X")
    assert answer is client_body
    assert status_of(client_body).status in (408, 413)


def test_nothing_sent_waits_again_and_something_sent_is_a_502() -> None:
    assert after_failure(Failure.NOT_SENT, client_body=None, replica="p", what="X") is None
    answer = after_failure(Failure.SENT, client_body=None, replica="pod-1", what="Reset")
    assert isinstance(answer, UpstreamFailed)
    assert str(answer) == "pod-1: Reset"
    assert status_of(answer).status == 502


def test_every_row_is_a_json_error_and_a_metrics_reason() -> None:
    for exc_type, spec in ERROR_STATUS.items():
        exc = Shed("t", "at_zero") if exc_type is Shed else exc_type("t")
        document = error_document(exc, "detail")
        assert document == {
            "error": {"message": f"{spec.message}: detail", "type": spec.type, "code": spec.code}
        }
        # A 503 says when to retry, except not_woken and lora_unsupported: nobody knows
        # when the fix comes.
        waits = spec.code not in ("not_woken", "lora_unsupported")
        assert spec.retry_after == (spec.status == 503 and waits), exc_type
        assert spec.code in REASONS
    assert status_of(BodyStalled()).status == 408
    assert status_of(ValueError()).status == 502  # unlisted: an upstream failure


def test_not_woken_names_what_the_scaler_said() -> None:
    exc = NotWoken('Deployment ml/llama: autoscaling.tidal.dev/window: "5x" is not allowed')
    error = error_document(exc)["error"]
    assert (status_of(exc).status, error["code"]) == (503, "not_woken")
    assert error["message"].endswith(
        ': Deployment ml/llama: autoscaling.tidal.dev/window: "5x" is not allowed'
    )


def test_held_bodies_cap() -> None:
    held = HeldBodies(1000)
    assert held.take(600)
    assert not held.take(500)
    assert held.held_bytes == 600
    held.give_back(600)
    assert held.take(1000)
    unbounded = HeldBodies(0)
    assert unbounded.take(10**12)
    with pytest.raises(ValueError, match="held body cap"):
        HeldBodies(-1)


def test_every_answer_has_its_standard_reason_phrase() -> None:
    for spec in ERROR_STATUS.values():
        head = error_head_and_body(
            spec.status,
            error_type=spec.type,
            code=spec.code,
            message=spec.message,
            request_id=b"r",
            retry_after_s=None,
            close=False,
            http10=False,
        )
        phrase = (
            b"Content Too Large" if spec.status == 413 else HTTPStatus(spec.status).phrase.encode()
        )
        assert head.startswith(b"HTTP/1.1 %d %s\r\n" % (spec.status, phrase)), head[:40]


@pytest.mark.parametrize(
    ("exc", "status", "code", "retry_after"),
    [
        (NoTarget(), 404, "no_target", False),
        (GateClosed("t"), 404, "no_target", False),
        (InvalidJson("x"), 400, "invalid_json", False),
        (BodyNotObject("x"), 400, "body_not_object", False),
        (BadModel("x"), 400, "bad_model", False),
        (BodyStalled(), 408, "body_timeout", False),
        (BodyTooLarge(), 413, "body_too_large", False),
        (BufferFull("t"), 503, "buffer_full", True),
        (Draining(), 503, "draining", True),
        (ColdStartTimeout("t"), 504, "cold_start_timeout", False),
        (AllRefused(), 502, "all_refused", False),
        (UpstreamFailed(), 502, "upstream_failed", False),
        (RefusedRequest(), 400, "refused_request", False),
        (ConnectRefused(), 405, "refused_request", False),
    ],
)
def test_error_status_table(exc: Exception, status: int, code: str, retry_after: bool) -> None:
    # error_response writes the answer as bytes (the data path is byte-level).
    answer = error_response(exc, request_id="r1", retry_after_s=3)
    head, body_bytes = answer.split(b"\r\n\r\n", 1)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    assert int(status_line.split(" ")[1]) == status
    assert headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(body_bytes)
    body = json.loads(body_bytes)
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert body["error"]["type"]
    assert ("Retry-After" in headers) is retry_after
    assert headers["X-Request-Id"] == "r1"


def test_every_503_where_waiting_helps_says_when_to_retry() -> None:
    # A held request refused for load or a drain is worth sending again soon;
    # not_woken and lora_unsupported wait on a person fixing an annotation or a model
    # server's flags, so they name no time.
    no_wait = {
        spec.code for spec in ERROR_STATUS.values() if spec.status == 503 and not spec.retry_after
    }
    assert no_wait == {"not_woken", "lora_unsupported"}


def test_a_503_without_retry_after_tells_openai_clients_not_to_retry() -> None:
    not_woken = error_response(NotWoken("fix it"), request_id="r", retry_after_s=3)
    head = not_woken.split(b"\r\n\r\n", 1)[0].lower()
    assert b"x-should-retry: false" in head and b"retry-after" not in head
    full = error_response(Draining(), request_id="r", retry_after_s=3)
    head = full.split(b"\r\n\r\n", 1)[0].lower()
    assert b"retry-after: 3" in head and b"x-should-retry" not in head
