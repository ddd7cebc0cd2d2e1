"""A Triton-like dynamic batcher as a pure model: time is passed in.

Triton's dynamic batcher groups queued inference requests into one execution
of the model. Main decision: the model runs one batch at a time; when it is
free, the next batch takes queued requests first come first served while their
items fit in ``max_batch_size`` (a request larger than that runs alone; the
Triton-like server refuses such requests before they get here, as Triton
does). This is Triton's behaviour with ``max_queue_delay_microseconds: 0``, its default:
it does not hold a request back hoping for a bigger batch.

Execution time is ``exec_base_s + exec_per_item_s * items``. The defaults are
illustrative of a small vision model (a ResNet-50 class network under
TensorRT on a data-centre GPU: a few milliseconds per batch, growing slowly
with batch size); no published figure is reproduced, unlike the LLM model.

For each request the model reports what Triton's metrics count: time queued
(``nv_inference_queue_duration_us``) and time computing
(``nv_inference_compute_infer_duration_us``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

__all__ = ["BatchOutcome", "BatchPlan", "BatcherParams", "DynamicBatcher"]


@dataclass(frozen=True, slots=True)
class BatcherParams:
    max_batch_size: int = 32
    exec_base_s: float = 0.003
    exec_per_item_s: float = 0.0002

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise ValueError(
                f"BatcherParams.max_batch_size must be >= 1; got {self.max_batch_size}"
            )
        for name in ("exec_base_s", "exec_per_item_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"BatcherParams.{name} must be a finite number >= 0; got {value!r}"
                )
        if self.exec_base_s == 0 and self.exec_per_item_s == 0:
            raise ValueError("BatcherParams: exec_base_s and exec_per_item_s cannot both be 0")

    def exec_time_s(self, items: int) -> float:
        return self.exec_base_s + self.exec_per_item_s * items


@dataclass(frozen=True, slots=True)
class BatchPlan:
    start_s: float
    end_s: float
    requests: int
    items: int


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """A finished batch: per request id, (queue seconds, compute seconds)."""

    end_s: float
    items: int
    done: dict[int, tuple[float, float]]


@dataclass(slots=True)
class _Queued:
    request_id: int
    items: int
    arrival_s: float


class DynamicBatcher:
    def __init__(self, params: BatcherParams | None = None) -> None:
        self.params = params or BatcherParams()
        self._queue: deque[_Queued] = deque()
        self._batch: list[_Queued] = []
        self._plan: BatchPlan | None = None
        self._busy_done_s = 0.0

    def add(self, request_id: int, *, items: int, now: float) -> None:
        if items < 1:
            raise ValueError(f"a request must carry at least one item; got {items}")
        self._queue.append(_Queued(request_id, items, now))

    @property
    def pending(self) -> int:
        """Requests waiting for execution (Triton's ``nv_inference_pending_request_count``)."""
        return len(self._queue)

    @property
    def executing(self) -> int:
        return len(self._batch)

    @property
    def has_work(self) -> bool:
        return bool(self._queue)

    @property
    def in_batch(self) -> BatchPlan | None:
        return self._plan

    def busy_time_s(self, now: float) -> float:
        busy = self._busy_done_s
        if self._plan is not None:
            busy += max(0.0, min(now, self._plan.end_s) - self._plan.start_s)
        return busy

    def begin_batch(self, now: float) -> BatchPlan | None:
        if self._plan is not None:
            raise RuntimeError(
                "begin_batch called while a batch is executing; call end_batch first"
            )
        if not self._queue:
            return None
        batch = [self._queue.popleft()]
        items = batch[0].items
        while self._queue and items + self._queue[0].items <= self.params.max_batch_size:
            nxt = self._queue.popleft()
            batch.append(nxt)
            items += nxt.items
        self._batch = batch
        self._plan = BatchPlan(
            start_s=now,
            end_s=now + self.params.exec_time_s(items),
            requests=len(batch),
            items=items,
        )
        return self._plan

    def end_batch(self) -> BatchOutcome:
        plan = self._plan
        if plan is None:
            raise RuntimeError("end_batch called with no batch executing")
        compute = plan.end_s - plan.start_s
        done = {q.request_id: (plan.start_s - q.arrival_s, compute) for q in self._batch}
        self._busy_done_s += compute
        self._plan = None
        self._batch = []
        return BatchOutcome(end_s=plan.end_s, items=plan.items, done=done)
