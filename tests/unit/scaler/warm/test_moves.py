"""The warm tier's moves (scaler.warm.moves) and the template write they make (node_preference).

Covers: a GPU that has held only sleepers past the settle time is emptied
onto a GPU that serves, named by that GPU's node; nothing moves before the
settle time, without GPU metrics, for a Deployment of more than one replica,
or again within the cooldown; the template prefers the node with Tidal's
term beside the user's own, replaced on the next move and taken away with
nothing of Tidal's left behind.
"""

from __future__ import annotations

from typing import Any

from scaler.kube.types import PodInfo, TargetSnapshot
from scaler.policy.warm_tier.node_preference import PREFERRED_NODE, prefer_node, preferred_node
from scaler.warm.choices import WarmChoices
from scaler.warm.gpu_memory import GpuMemory, GpuMemorySnapshot
from scaler.warm.moves import Move, MoveSettings, WarmMoves
from scaler.warm.pool import Phase, PoolEntry, WarmPool
from scaler.warm.views import ModelBoard, ModelView
from tests.unit.scaler.fakes import deployment

AWAKE, ASLEEP, GPU = 28_000, 600, 81_920


def pod(name: str, node: str) -> PodInfo:
    return PodInfo(
        namespace="ml", name=name, labels={}, ip="10.0.0.1", ready=True, terminating=False,
        node=node,
    )  # fmt: skip


class Cluster:
    """GPU-1 on node-1 serves model a; GPU-2 on node-2 holds model b asleep, alone."""

    def __init__(self, *, replicas: int = 1) -> None:
        self.memory = GpuMemory(stale_after_s=1e9)
        self.memory.snapshot = GpuMemorySnapshot(
            at=0.0,
            pods={("ml", "a-1"): ("GPU-1", AWAKE), ("ml", "b-1"): ("GPU-2", ASLEEP)},
            free={"GPU-1": GPU - AWAKE, "GPU-2": GPU - ASLEEP},
        )
        self.pool = WarmPool(self.memory)
        self.pool.targets.update({"ml/a-1": "ml/a", "ml/b-1": "ml/b"})
        self.pool.book.awake.update({"ml/a": AWAKE, "ml/b": AWAKE})
        self.pool.book.asleep.update({"ml/a": ASLEEP, "ml/b": ASLEEP})
        self.pool.entries["ml/b-1"] = PoolEntry(
            "ml/b", "ml/b-1", "http://10.0.0.2:8000", "10.0.0.2:8000", "node-2",
            Phase.SLEEPING, 1, 0.0,
        )  # fmt: skip
        board = ModelBoard()
        a, b = pod("a-1", "node-1"), pod("b-1", "node-2")
        board.publish("ml/a", ModelView(idle_since=None, last_used=0.0, pods=(a,), sleep_level=1))
        board.publish("ml/b", ModelView(idle_since=0.0, last_used=0.0, pods=(b,), sleep_level=1))
        self.snapshots = {
            "ml/a": TargetSnapshot(deployment("a", "ml", replicas=1), (a,)),
            "ml/b": TargetSnapshot(deployment("b", "ml", replicas=replicas), (b,)),
        }
        choices = WarmChoices(self.pool, board)
        self.moves = WarmMoves(self.pool, choices, board, MoveSettings(settle_s=60.0))


def test_a_gpu_of_sleepers_alone_is_emptied_onto_a_serving_one_after_the_settle_time() -> None:
    c = Cluster()
    assert c.moves.plan(0.0, c.snapshots) == []  # only sleepers since now
    assert c.moves.plan(30.0, c.snapshots) == []
    assert c.moves.plan(61.0, c.snapshots) == [Move("ml/b", "ml/b-1", "node-1", "GPU-1")]
    assert c.moves.plan(62.0, c.snapshots) == []  # moved: not again within the cooldown


def test_nothing_moves_without_gpu_metrics_or_for_several_replicas() -> None:
    c = Cluster()
    c.memory.snapshot = None
    assert c.moves.plan(61.0, c.snapshots) == []
    several = Cluster(replicas=2)
    several.moves.plan(0.0, several.snapshots)
    assert several.moves.plan(61.0, several.snapshots) == []


PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def preferred(template: dict[str, Any]) -> list[dict[str, Any]]:
    terms: list[dict[str, Any]] = template["spec"]["affinity"]["nodeAffinity"][PREFERRED]
    return terms


def test_the_template_prefers_the_node_beside_the_users_own_terms() -> None:
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    users = {"weight": 5, "preference": {"matchExpressions": [zone]}}
    template = {
        "metadata": {"labels": {"app": "b"}},
        "spec": {"affinity": {"nodeAffinity": {PREFERRED: [users]}}},
    }
    first = prefer_node(template, "node-1")
    assert preferred_node(first) == "node-1"
    terms = preferred(first)
    assert terms[0] == users and terms[1]["weight"] == 100
    assert terms[1]["preference"]["matchExpressions"][0]["values"] == ["node-1"]
    terms = preferred(prefer_node(first, "node-3"))
    assert len(terms) == 2 and terms[1]["preference"]["matchExpressions"][0]["values"] == ["node-3"]
    assert prefer_node(prefer_node(first, "node-3"), None) == template  # as it was
    bare: dict[str, Any] = {"spec": {"containers": []}}
    assert PREFERRED_NODE in prefer_node(bare, "n")["metadata"]["annotations"]
    assert prefer_node(prefer_node(bare, "n"), None) == bare
