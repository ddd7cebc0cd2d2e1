"""Why a request could not get an endpoint: the hold's outcomes other than a replica.

Each is one row of the status table (:mod:`activator.statuses`); they live
here, below the gate and the adapter slots, because both raise them. Two
kinds:

- the request waited and its time, the buffer or the target ran out
  (:class:`BufferFull`, :class:`Shed`, :class:`ColdStartTimeout`,
  :class:`GateClosed`, :class:`DrainEnded`);
- the request is for a LoRA adapter that the replicas there are can never
  serve (:class:`AdapterWithdrawn`, :class:`LoraUnsupported`,
  :class:`AdapterLoadFailed`): it is answered the moment that is known,
  never left to wait out its cold-start timeout.

A refusal while the model wakes carries ``retry_after_s``, the expected
time left until a replica is ready (:mod:`activator.holding.wake_clock`), so
a client retries when it is likely to be served rather than every second.
"""

from __future__ import annotations

__all__ = [
    "SHED_CAUSES",
    "AdapterLoadFailed",
    "AdapterWithdrawn",
    "BufferFull",
    "ColdStartTimeout",
    "DrainEnded",
    "GateClosed",
    "HoldError",
    "LoraUnsupported",
    "Shed",
]

# Why a held request was shed (a metric label, the log's kind, the answer's words).
HIGHER_CLASS = "higher_class"
TENANT_SHARE = "tenant_share"
AT_ZERO = "at_zero"
SHED_CAUSES = (HIGHER_CLASS, TENANT_SHARE, AT_ZERO)


class HoldError(Exception):
    """A request could not get an endpoint.

    ``retry_after_s``: when to retry, where the hold knows better than the
    activator's default (the model is waking); None: the default.
    """

    retry_after_s: int | None = None

    @property
    def detail(self) -> str:
        """What the client's error message adds to the status table's (none by default)."""
        return ""


class BufferFull(HoldError):
    """``max_buffered`` requests already wait for this target."""

    def __init__(self, name: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(name)
        self.retry_after_s = retry_after_s


class Shed(HoldError):
    """Displaced by a higher class or a heavier tenant's excess at ``max_buffered``, or a
    sheddable request refused while no replica is ready; ``cause`` says which
    (one of :data:`SHED_CAUSES`)."""

    def __init__(self, name: str, cause: str, *, retry_after_s: int | None = None) -> None:
        if cause not in SHED_CAUSES:
            raise ValueError(f"unknown shed cause {cause!r}; known: {', '.join(SHED_CAUSES)}")
        super().__init__(name, cause)
        self.cause = cause
        self.retry_after_s = retry_after_s

    @property
    def detail(self) -> str:
        return _SHED_WORDS[self.cause]


_SHED_WORDS = {
    HIGHER_CLASS: "a request of a higher priority class took its place at max-buffered",
    TENANT_SHARE: "its tenant held more than its share of max-buffered, and another "
    "tenant's request took its place",
    AT_ZERO: "a sheddable request is refused while no replica is ready "
    "(routing.tidal.dev/shed-at-zero); the model is waking",
}


class ColdStartTimeout(HoldError):
    """No endpoint became free within the cold-start timeout."""


class GateClosed(HoldError):
    """The target went away while the request waited."""


class DrainEnded(HoldError):
    """The activator's drain timeout ended while the request waited."""


class _Explained(HoldError):
    """An outcome whose message says what was found and what to do."""

    @property
    def detail(self) -> str:
        return str(self.args[0]) if self.args else ""


class AdapterWithdrawn(_Explained):
    """The request's adapter is no longer declared for its model (answered as a request
    for an unknown adapter is)."""


class LoraUnsupported(_Explained):
    """No replica of the model can load LoRA adapters (none publishes LoRA support)."""


class AdapterLoadFailed(_Explained):
    """Every replica there is refused to load the adapter (or cannot load adapters)."""
