"""Each target's status record: what its status annotation holds, and what is still to write.

The actuator is the one owner (:attr:`scaler.actuator.Actuator.records`): a
write plan is made from the target's record (:mod:`scaler.writes.plan`) and
the actuator keeps the record a plan leaves. Each target's reconciler tells
it what the Deployment carries at each sync: a changed config may report its
problems again, and a follower copies the status annotation the leader
wrote, so that on taking over it rewrites it only if its decision differs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scaler.kube.types import LeaderElector
from scaler.policy.status_doc import StatusDocument

__all__ = ["StatusRecord", "StatusRecords"]


@dataclass(frozen=True, slots=True)
class StatusRecord:
    """What a target's status annotation holds and what is still to be written.

    ``status``: the annotation as far as this replica knows; ``intended``: a
    status whose write failed after its change took (its reason and time win
    over the previous ones at the next write); ``last_change_wall``: when the
    scale last changed (``lastChangeTime``); ``problem_reported``: the
    ``InvalidAnnotation`` Warning of these annotations was raised;
    ``warnings_reported``: so were the Warnings that leave scaling on
    (``InvalidRouting``).
    """

    status: StatusDocument | None = None
    intended: StatusDocument | None = None
    last_change_wall: str | None = None
    problem_reported: bool = False
    warnings_reported: bool = False

    @property
    def last_desired(self) -> object:
        """The last target decided: the one a failed status write still intends, if
        any, else the one the annotation holds."""
        return (self.intended or self.status or {}).get("desired")


class StatusRecords:
    """Every target's :class:`StatusRecord`, with one owner: the actuator.

    A plan is made from the target's record
    (:meth:`~scaler.actuator.Actuator.plan`) and the actuator keeps the
    record a plan leaves (:meth:`keep`); each target's
    reconciler tells it what the Deployment carries at each sync (:meth:`seen`): a
    changed config may report its problems again, and a follower copies the
    status annotation the leader wrote, so that on taking over it rewrites it
    only if its decision differs.
    """

    def __init__(self, leader: LeaderElector) -> None:
        self._leader = leader
        self._records: dict[str, StatusRecord] = {}

    def get(self, key: str) -> StatusRecord:
        return self._records.get(key, StatusRecord())

    def start(self, key: str, status: StatusDocument | None) -> None:
        """A new target: its status annotation as the Deployment carries it."""
        self._records[key] = StatusRecord(status=status)

    def seen(self, key: str, status: StatusDocument | None, *, changed: bool) -> None:
        """The target as synced: ``changed`` config (its problems are reported
        again); on a follower, the status annotation the leader wrote."""
        record = self.get(key)
        if changed:
            record = replace(record, problem_reported=False, warnings_reported=False)
        if not self._leader.is_leader:
            record = replace(record, status=status)
        self._records[key] = record

    def warnings_due(self, key: str) -> bool:
        """True once per set of annotations, on the leader: raise the Warnings that
        leave scaling on now (marked raised even if the Events are lost)."""
        record = self.get(key)
        if record.warnings_reported or not self._leader.is_leader:
            return False
        self._records[key] = replace(record, warnings_reported=True)
        return True

    def keep(self, key: str, before: StatusRecord, after: StatusRecord) -> None:
        """The record as a plan made from ``before`` left it. A config change while it ran
        may have cleared the problems already reported, and that clearing stands."""
        current = self.get(key)
        reported_now = after.problem_reported and not before.problem_reported
        self._records[key] = replace(
            after,
            problem_reported=current.problem_reported or reported_now,
            warnings_reported=current.warnings_reported,
        )

    def forget(self, key: str) -> None:
        self._records.pop(key, None)
