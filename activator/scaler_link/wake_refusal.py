"""When Tidal will not wake a target: the scaler's refusal, and the held requests it answers.

Tidal leaves a Deployment whose ``autoscaling.tidal.dev/`` annotations are
invalid alone, so at zero it stays at zero. A request held for it would wait
for its cold-start timeout (10 minutes by default) and get a 504 that says
nothing of why. Instead the scaler answers the activation with a refusal
(HTTP 422, ``{"error": {"type": "not_woken", "message": ...}}``, the message
naming the Deployment and each bad annotation with what is allowed), and the
reporter fails the requests held for that target with :class:`NotWoken`,
carrying that message, which the status table answers as a 503.

Main decisions:

- **Asked, not remembered.** The activator keeps no "broken" flag: a request
  that arrives later is held and triggers an activation like any other, so
  it is refused within one round trip to the scalers, by whichever
  activator holds it, and the first request after the annotation is fixed
  wakes the model. Nothing has to expire or be shared between activators.
- **Any replica's refusal counts.** Every scaler replica keeps the configs,
  so a follower refuses as the leader would; the refusal ends the
  activation for that target at every replica (its other posts would only
  be refused again).
"""

from __future__ import annotations

import json

from activator.holding.gate import HoldError

__all__ = ["NOT_WOKEN", "NotWoken", "refusal"]

# The error type of the scaler's refusal (scaler.app answers it).
NOT_WOKEN = "not_woken"
REFUSAL_STATUS = 422


class NotWoken(HoldError):
    """Tidal will not wake the target; the message is the scaler's, naming the
    Deployment and each bad annotation."""

    @property
    def detail(self) -> str:
        """What the client's error message adds to the status table's."""
        return str(self.args[0]) if self.args else ""


def refusal(status: int, raw: bytes) -> str | None:
    """The scaler's reason when its answer to ``/v1/activate`` refuses to wake, else None."""
    if status != REFUSAL_STATUS:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or error.get("type") != NOT_WOKEN:
        return None
    message = error.get("message")
    return message if isinstance(message, str) and message else None
