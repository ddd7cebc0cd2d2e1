"""The refusal log: each kind and target said at once, repeats counted, not logged.

Covers: the first refusal of a (code, target) is a line naming the status,
the code, the target (``-`` when none is known) and the client's message;
repeats within the interval are left out and counted in the next line; other
codes and targets are logged on their own; 5xx at WARNING, 4xx at INFO.
"""

from __future__ import annotations

import logging

from activator.forwarding.refusal_log import RefusalLog


def test_each_kind_is_said_once_per_interval_with_what_was_left_out() -> None:
    log = RefusalLog(interval_s=10.0)
    first = log.note(status=404, code="no_target", target="", message="model 'x'", now=0.0)
    assert first == (logging.INFO, "refused 404 no_target (target -): model 'x'")
    for t in (1.0, 2.0, 9.9):
        assert log.note(status=404, code="no_target", target="", message="m", now=t) is None
    other = log.note(status=400, code="invalid_json", target="", message="not JSON", now=3.0)
    assert other == (logging.INFO, "refused 400 invalid_json (target -): not JSON")
    held = log.note(status=503, code="buffer_full", target="ml/llama", message="full", now=3.0)
    assert held == (logging.WARNING, "refused 503 buffer_full (target ml/llama): full")
    again = log.note(status=404, code="no_target", target="", message="model 'y'", now=10.0)
    assert again == (
        logging.INFO,
        "refused 404 no_target (target -): model 'y' [and 3 more like it in the last 10s]",
    )
