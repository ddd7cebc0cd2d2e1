"""What the GPU ledger and the scaling policy read of the warm tier.

The ledger (:mod:`scaler.gpu_ledger`) counts devices whole and splits their
seconds into serving, starting and sleeping-only by what their pods do; it
cannot tell a sleeping pod from an awake one, nor (on a node of several
time-sliced GPUs) which GPU a pod is on. :class:`PoolBill` answers both from
the warm tier's books: the phase it keeps for each pod that is not awake,
and the DCGM snapshot it reads GPU memory from.

:class:`TierSleepers` gives the policy a target's sleepers and the share of a
device they keep paid (from the ledger's last bill), so that SLO-first
scaling weighs sleeping against zero with the tier (one plan).

Main decision: a pod still draining towards its sleep counts as awake: it
holds its weights and KV cache until the sleep call is done.
"""

from __future__ import annotations

from collections.abc import Callable

from scaler.kube.types import TargetSnapshot
from scaler.policy.api import Sleepers
from scaler.policy.warm_tier import PodUse
from scaler.warm.pool import Phase, WarmPool

__all__ = ["WAKE_PRIOR_S", "PoolBill", "TierSleepers"]

#: A wake's time before one is measured: a level-1 wake of an 8B model and its
#: warm-up (docs/warm-tier.md: 0.93 s in the sandbox).
WAKE_PRIOR_S = 1.0


class PoolBill:
    """The warm tier's books as the GPU ledger reads them."""

    def __init__(self, pool: WarmPool) -> None:
        self._pool = pool

    def pod_use(self, pod: str) -> PodUse | None:
        """What a ready pod (``namespace/pod``) is doing: asleep, waking, or (None) awake."""
        phase = self._pool.phase_of(pod)
        if phase is Phase.SLEEPING:
            return PodUse.ASLEEP
        if phase is Phase.WAKING:
            return PodUse.WAKING
        return None

    def placements(self, now: float) -> dict[tuple[str, str], str]:
        """(namespace, pod) -> the GPU's UUID, from a fresh DCGM snapshot (empty without one)."""
        memory = self._pool.memory
        snap = memory.fresh(now) if memory is not None else None
        return {} if snap is None else {key: uuid for key, (uuid, _) in snap.pods.items()}


class TierSleepers:
    """What the scaling policy reads of a target's sleepers (one plan with the tier):
    how many sleep, the share of a device they keep paid (the GPU ledger's last
    bill: nothing beside a serving model), their level and the wake's time (the
    last one measured, else :data:`WAKE_PRIOR_S`)."""

    def __init__(self, pool: WarmPool, share: Callable[[list[str]], float | None]) -> None:
        self._pool = pool
        self._share = share

    def __call__(self, key: str, snap: TargetSnapshot) -> Sleepers:
        names = [f"{p.namespace}/{p.name}" for p in snap.pods]
        asleep = [n for n in names if self._pool.phase_of(n) is Phase.SLEEPING]
        share = self._share(asleep or names)
        last = self._pool.counter(key).last_wake_s
        return Sleepers(
            asleep=len(asleep),
            device_share=1.0 if share is None else share,
            level=self._pool.levels.get(key, 1),
            wake_s=WAKE_PRIOR_S if last is None else last,
        )
