"""What the scaler says of the fleet, kept once per activator: how many activators, who sleeps.

The scalers answer every stats report with how many activators report (the
largest fresh count among the replicas), and the leader also lists the
endpoints its warm tier has asleep, per target. Both concern every target,
arrive for all of them at once, and must also reach a target first seen
later. So they are kept here, once: the registry writes what the scaler
link hears, and each target reads it when it works out its limits and
which endpoints are ready, rather than keeping a copy of its own. A target
is told that the word changed (the registry calls its ``configure``), not
what it says.

- **Activators**: this activator enforces :meth:`ScalerWord.share` of a
  replica's ``container-concurrency``, ``max(1, cc // activators)``, so
  several activators together stay within the bound as long as there are no
  more of them than ``cc`` (Knative's revision throttler shares its
  breaker's capacity the same way); a prefix-balanced target records that
  share of each replica's cache.
- **Sleeping**: an endpoint the warm tier has asleep is never ready
  (:mod:`activator.replicas.readiness`), so a request for a model whose
  replicas all sleep is held and its activation wakes one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["ScalerWord"]


class ScalerWord:
    """The scaler's last word: the activator count and the sleeping endpoints per target."""

    __slots__ = ("_sleeping", "activators")

    def __init__(self) -> None:
        self.activators = 1
        self._sleeping: dict[str, frozenset[str]] = {}

    def share(self, container_concurrency: int) -> int:
        """This activator's share of a replica's ``container-concurrency`` (0: no bound)."""
        if container_concurrency == 0:
            return 0
        return max(1, container_concurrency // self.activators)

    def asleep(self, target: str, key: str) -> bool:
        """Whether the endpoint ``key`` (``ip:port``) of ``target`` sleeps."""
        keys = self._sleeping.get(target)
        return keys is not None and key in keys

    def hear_activators(self, count: int) -> bool:
        """The scaler's count of reporting activators; whether it changed."""
        count = max(1, count)
        if count == self.activators:
            return False
        self.activators = count
        return True

    def hear_sleeping(self, by_target: Mapping[str, Iterable[str]]) -> set[str]:
        """The leader's whole list of sleeping endpoints; the targets whose list changed."""
        new = {name: frozenset(keys) for name, keys in by_target.items() if keys}
        old, self._sleeping = self._sleeping, new
        return {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}
