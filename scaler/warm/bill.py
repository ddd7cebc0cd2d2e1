"""What the GPU ledger reads of the warm tier: each pod's state, and which GPU it is on.

The ledger (:mod:`scaler.gpu_ledger`) counts devices whole and splits their
seconds into serving, starting and sleeping-only by what their pods do; it
cannot tell a sleeping pod from an awake one, nor (on a node of several
time-sliced GPUs) which GPU a pod is on. :class:`PoolBill` answers both from
the warm tier's books: the phase it keeps for each pod that is not awake,
and the DCGM snapshot it reads GPU memory from.

Main decision: a pod still draining towards its sleep counts as awake: it
holds its weights and KV cache until the sleep call is done.
"""

from __future__ import annotations

from scaler.policy.warm_tier import PodUse
from scaler.warm.pool import Phase, WarmPool

__all__ = ["PoolBill"]


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
