"""Only the Lease holder writes, and never an outdated decision (issue 13).

Covers, with the fakes of the scaler's seams:
- a leader that loses the Lease between two writes of one decision stops
  there: no scale after the deletion costs, no status after the scale;
- the decision's resourceVersion is the precondition of its writes: when
  the Deployment changed in between (a new leader already scaled it), the
  controller re-reads, decides again on what is there and does not re-apply
  the old value; when it changed only in its status, the re-decision writes
  the same scale against the fresh version within the same call;
- a conflict that deciding again resolves counts no failed write; a conflict
  on every attempt gives up after a bounded number of decisions and counts
  one;
- leadership is asked where writes are fenced only: no module of the
  controller or the reconcilers reads whether this replica leads, and a
  follower's refused adapter loads raise no Event (the actuator fences it).
"""

from __future__ import annotations

import ast
from pathlib import Path

from groundwork.kube.errors import Conflict
from groundwork.rules.stats_report import parse_report
from scaler.policy.api import Observation
from scaler.signals.activator_reports import ActivatorReports
from tests.unit.scaler.fakes import deployment, pod
from tests.unit.scaler.test_controller import KEY, ScriptedPolicy, World, idle


def failures(w: World) -> float:
    got = w.metrics.registry.get_sample_value("tidal_scaler_write_failures_total", {"target": KEY})
    return got or 0.0


async def test_lease_lost_between_costs_and_scale_stops_the_writes() -> None:
    policy = ScriptedPolicy()
    policy.desired = 3
    w = World(replicas=3, policy=policy)
    w.cluster.put(deployment(replicas=3), (pod("p1"), pod("p2", ip="10.0.0.2")))
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(2)
    policy.desired = 2
    calls = len(w.scale.calls)

    def lose(kind: str) -> None:
        if kind == "costs":
            w.leader.is_leader = False  # renewal failed while the costs were written

    w.scale.before_write = lose
    await w.run_for(2)
    assert w.scale.calls[calls:] == ["costs"]
    assert w.replicas() == 3
    assert w.events.reasons() == []


async def test_lease_lost_after_scale_writes_no_status() -> None:
    policy = ScriptedPolicy()
    w = World(replicas=1, policy=policy)
    w.set(idle("activator"), idle("scrape"))
    await w.run_for(2)
    statuses = len(w.scale.statuses)
    policy.desired = 4

    def lose(kind: str) -> None:
        if kind == "scale":
            w.leader.is_leader = False

    w.scale.before_write = lose
    await w.run_for(2)
    assert w.replicas() == 4  # that write was sent while still leader
    assert len(w.scale.statuses) == statuses
    assert w.events.reasons() == []  # nor the Event after it


class ChangedUnderUs(ScriptedPolicy):
    """Wants 4; records the spec each decision saw."""

    def __init__(self) -> None:
        super().__init__()
        self.desired = 4
        self.specs: list[int] = []

    def decide(self, *, observation: Observation, **kw: object):  # type: ignore[no-untyped-def, override]
        self.specs.append(observation.spec_replicas)
        return super().decide(observation=observation, **kw)  # type: ignore[arg-type]


async def test_conflict_re_reads_and_decides_again() -> None:
    policy = ChangedUnderUs()
    w = World(replicas=1, policy=policy)
    w.set(idle("activator"), idle("scrape"))
    first = True

    def new_leader_scaled(kind: str) -> None:
        nonlocal first
        if kind == "scale" and first:
            first = False
            w.cluster.set_replicas(KEY, 4)  # a new leader got there first

    w.scale.before_write = new_leader_scaled
    await w.controller.tick(w.now)
    assert policy.specs == [1, 4]  # decided again on the re-read Deployment
    assert "read" in w.scale.calls
    assert w.scale.scales == []  # the old decision was never re-applied
    assert w.replicas() == 4


async def test_status_only_change_is_retried_on_the_fresh_version() -> None:
    policy = ChangedUnderUs()
    w = World(replicas=1, policy=policy)
    w.set(idle("activator"), idle("scrape"))
    touched = False

    def status_update(kind: str) -> None:
        nonlocal touched
        if kind == "scale" and not touched:
            touched = True
            w.cluster.touch(KEY)  # the Deployment controller updated its status

    w.scale.before_write = status_update
    await w.controller.tick(w.now)
    assert policy.specs == [1, 1]
    assert w.scale.scales == [(KEY, 4)]  # once, on the fresh resourceVersion
    assert w.events.reasons() == ["ScaledUp"]
    assert failures(w) == 0  # a conflict that deciding again resolved is no failure


async def test_conflicts_on_every_attempt_give_up_until_the_next_tick() -> None:
    policy = ChangedUnderUs()
    w = World(replicas=1, policy=policy)
    w.set(idle("activator"), idle("scrape"))
    w.scale.fail_next["scale"] = [Conflict("modified", status=409) for _ in range(10)]
    await w.controller.tick(w.now)
    assert len(policy.specs) == 3  # the decision and two more on re-read state
    assert w.scale.calls.count("scale") == 3
    assert w.replicas() == 1
    assert failures(w) == 1  # one decision that could not be written


ROOT = Path(__file__).resolve().parents[3]
# What asking whether this replica leads looks like (scaler.kube.types.LeaderElector).
_ASKING = {"is_leader", "leading", "LeaderElector"}


def test_the_controller_and_the_reconcilers_never_ask_who_leads() -> None:
    paths = [ROOT / "scaler/controller.py", *sorted((ROOT / "scaler/targets").glob("*.py"))]
    asking = {
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.Attribute) and node.attr in _ASKING)
        or (isinstance(node, ast.Name) and node.id in _ASKING)
    }
    assert not asking, f"leadership is the actuator's and the warm tier's to check: {asking}"


async def test_a_followers_refused_adapter_loads_raise_no_event() -> None:
    reports = ActivatorReports()
    w = World(replicas=1, leader=False, reports=reports)
    w.scrape.readings[KEY] = idle("scrape")
    body = {"activator": "a", "period_s": 1.0, "targets": {KEY: {"adapter_refusals": ["no"]}}}
    reports.record(parse_report(body), now=w.now)
    w.signals.arrived(reports.name, now=w.now)
    await w.run_for(4)
    assert w.events.events == []
    assert w.signals.take_adapter_refusals(KEY) == []  # taken all the same
