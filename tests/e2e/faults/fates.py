"""What became of each request: the fates, their tally, and the table a scenario prints.

A request sent by the fault suite's load client ends in exactly one fate:

- ``completed``: status 200 and the whole stream, every token and ``[DONE]``;
- ``error``: a status other than 200 with a JSON body in the OpenAI error
  shape (``{"error": {"message", "type", "code"}}``): a clean error, counted
  by status and code (``503 buffer_full``, ``503 draining``, ...);
- ``bad_error``: a status other than 200 without that body;
- ``cut``: status 200, then the stream ended before ``[DONE]``;
- ``no_answer``: the connection was accepted and then closed, reset or timed
  out before any status came back;
- ``refused``: the connection to the activator was refused (it never took
  the request; the suite stops sending to a SIGTERMed activator within its
  drain grace, as Services and load balancers do, and the activator serves
  until then, so this should not happen either).

Main decision: the load client classifies, the test only counts and asserts,
so the rules above live in one place (:func:`classify_error_body`) and the
table printed with ``pytest -s`` and in assertion messages is built from the
same records the assertions read.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

FATES = ("completed", "error", "bad_error", "cut", "no_answer", "refused")


def classify_error_body(body: bytes) -> str | None:
    """The ``code`` of an OpenAI-shaped JSON error body; None when it is not one."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict):
        return None
    code, message, kind = error.get("code"), error.get("message"), error.get("type")
    if not all(isinstance(v, str) and v for v in (code, message, kind)):
        return None
    return str(code)


@dataclass(frozen=True, slots=True)
class Record:
    """One request: where it went, when, and how it ended.

    Times are ``time.monotonic()`` seconds, one clock for every process on the
    machine, so the test can compare them with the moment it struck a fault.
    """

    index: int
    activator: int
    sent_s: float
    ended_s: float
    fate: str
    phase: str = ""
    status: int = 0
    code: str = ""
    message: str = ""
    detail: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        return cls(**data)


@dataclass(slots=True)
class Tally:
    """The records of one scenario (or one phase of it), counted for the table."""

    name: str
    records: list[Record] = field(default_factory=list)

    def fates(self) -> Counter[str]:
        return Counter(r.fate for r in self.records)

    def errors(self) -> Counter[str]:
        """Clean errors by ``"<status> <code>"``."""
        return Counter(f"{r.status} {r.code}" for r in self.records if r.fate == "error")

    def of(self, fate: str) -> list[Record]:
        return [r for r in self.records if r.fate == fate]

    def table(self) -> str:
        fates = self.fates()
        width = max(len(f) for f in (*FATES, *self.errors()))
        lines = [f"fates of {len(self.records)} requests: {self.name}"]
        lines.append(f"  {'fate':<{width}}  {'count':>5}")
        for fate in FATES:
            lines.append(f"  {fate:<{width}}  {fates.get(fate, 0):>5}")
            if fate == "error":
                for key, count in sorted(self.errors().items()):
                    lines.append(f"    {key:<{width - 2}}  {count:>5}")
        per_activator = Counter(r.activator for r in self.records)
        lines.append(
            "  by activator: " + ", ".join(f"#{a}: {n}" for a, n in sorted(per_activator.items()))
        )
        origin = min((r.sent_s for r in self.records), default=0.0)
        odd = [r for r in self.records if r.fate not in ("completed", "error")]
        for r in odd[:10]:
            lines.append(
                f"  ! #{r.index} ({r.phase or 'no phase'}) via activator {r.activator}: "
                f"{r.fate} (sent at "
                f"{r.sent_s - origin:.2f}s, ended at {r.ended_s - origin:.2f}s) {r.detail}"
            )
        return "\n".join(lines)
