"""The server view: scrape each ready pod's ``/metrics`` (docs/architecture.md, "The scaler").

Per engine, from each pod's Prometheus text:

- vLLM: ``vllm:num_requests_running``, ``vllm:num_requests_waiting`` (summed
  over the pod's series), ``vllm:kv_cache_usage_perc`` (0..1, mean over
  series; older vLLM says ``vllm:gpu_cache_usage_perc``); for SLO-first
  scaling the counters ``vllm:prompt_tokens_total`` and
  ``vllm:generation_tokens_total`` and the count and sum of the
  ``vllm:time_to_first_token_seconds`` histogram, and its buckets (the
  first tokens at or under each bound, from which the hub measures a
  model's attainment of its TTFT objective), each turned into what was new
  since the pod's previous scrape (a counter that went down: the server
  restarted, nothing new counted). A refresh sums the new prompt tokens
  and bucket counts over the pods it scraped, and that is what it brought
  (the same value until the next refresh), so the hub, which adds each
  value once, counts every token once;
- Triton: ``nv_inference_pending_request_count`` (summed over models),
  ``nv_gpu_utilization`` (0..1, mean over GPUs), and the rate of
  ``nv_inference_queue_duration_us`` over the rate of
  ``nv_inference_compute_infer_duration_us``: both are counters, so the ratio
  is taken between two successful scrapes of the same pod (a counter that went
  down means the server restarted; that pair is skipped).

Main decision, failures: a scrape that times out, is refused or does not
parse leaves the pod's last good values in place but marks the pod stale once
they are older than ``stale_after_s``; a stale pod makes the whole view not
fresh. Its last values still count (they can raise the scale) but nothing is
ever read as zero because a pod did not answer. Scrapes run at most
``max_concurrent`` at a time, each bounded by ``timeout_s`` and a body-size
limit, so a thousand pods cannot exhaust sockets or memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field

from scaler.policy.api import SignalKind
from scaler.signals.base import Brought, Levels, PodEndpoint, SourceReading, TargetPods
from scaler.signals.registry import Polled, PolledSourceSettings, SourceContext

__all__ = [
    "SCRAPE",
    "PodMetrics",
    "PodScraper",
    "ScrapeError",
    "ScrapeSettings",
    "parse_pod_metrics",
]

#: This source's name.
SCRAPE = "scrape"

log = logging.getLogger(__name__)

VLLM_RUNNING = "vllm:num_requests_running"
VLLM_WAITING = "vllm:num_requests_waiting"
VLLM_KV_CACHE = "vllm:kv_cache_usage_perc"
VLLM_KV_CACHE_OLD = "vllm:gpu_cache_usage_perc"
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens"  # counter family (samples ..._total)
VLLM_GENERATION_TOKENS = "vllm:generation_tokens"
VLLM_TTFT_COUNT = "vllm:time_to_first_token_seconds_count"
VLLM_TTFT_SUM = "vllm:time_to_first_token_seconds_sum"
VLLM_TTFT_BUCKET = "vllm:time_to_first_token_seconds_bucket"
TRITON_PENDING = "nv_inference_pending_request_count"
TRITON_QUEUE_US = "nv_inference_queue_duration_us"
TRITON_COMPUTE_US = "nv_inference_compute_infer_duration_us"
TRITON_GPU_UTIL = "nv_gpu_utilization"

ENGINES = ("vllm", "triton")


class ScrapeError(Exception):
    """A pod's metrics could not be fetched or read."""


@dataclass(frozen=True, slots=True)
class PodMetrics:
    """One successful scrape of one pod, in the units of the scaler's signals."""

    running: float = 0.0
    waiting: float = 0.0  # vLLM waiting, or Triton pending
    kv_cache_utilization: float | None = None  # 0..1
    gpu_utilization: float | None = None  # 0..1
    queue_us_total: float | None = None  # Triton counters, for rates
    compute_us_total: float | None = None
    queue_to_compute_ratio: float | None = None  # filled in from two scrapes
    # vLLM counters, and what was new in them since the previous scrape.
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    ttft_count_total: float | None = None
    ttft_sum_total: float | None = None
    new_prompt_tokens: float = 0.0
    new_generation_tokens: float = 0.0
    new_first_tokens: float = 0.0
    new_ttft_sum_s: float = 0.0
    # The TTFT histogram's cumulative buckets, (upper bound in s, count) in
    # rising order (+inf last), and what each gained since the previous scrape.
    ttft_buckets_total: tuple[tuple[float, float], ...] | None = None
    new_ttft_buckets: tuple[tuple[float, float], ...] = ()


def _collect(text: str) -> tuple[dict[str, list[float]], dict[float, float]]:
    """Every sample's value by name, and the TTFT histogram's buckets by bound (summed
    over its series)."""
    values: dict[str, list[float]] = {}
    ttft: dict[float, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                if name == VLLM_TTFT_BUCKET:
                    bound = float(sample.labels.get("le", "nan"))
                    if bound == bound:  # a bucket without a readable bound is skipped
                        ttft[bound] = ttft.get(bound, 0.0) + float(sample.value)
                    continue
                # The parser names counter samples ``<family>_total`` even when the
                # text says ``nv_inference_queue_duration_us``: index by family too.
                if family.type == "counter" and name == family.name + "_total":
                    name = family.name
                elif family.type == "counter" and name == family.name + "_created":
                    continue
                values.setdefault(name, []).append(float(sample.value))
    except ValueError as exc:  # prometheus_client raises ValueError on bad text
        raise ScrapeError(f"unparseable metrics text: {exc}") from exc
    return values, ttft


def _mean(xs: Iterable[float]) -> float | None:
    got = list(xs)
    return sum(got) / len(got) if got else None


def parse_pod_metrics(text: str, *, engine: str) -> PodMetrics:
    """Read the series the scaler uses for ``engine`` (docs/metrics.md) out of Prometheus text.

    A vLLM pod that exposes neither running nor waiting is not a vLLM pod we
    can read: :class:`ScrapeError`, so it is stale rather than idle.
    """
    values, ttft = _collect(text)
    if engine == "vllm":
        if VLLM_RUNNING not in values and VLLM_WAITING not in values:
            raise ScrapeError(f"no {VLLM_RUNNING} or {VLLM_WAITING} in the pod's metrics")
        kv = values.get(VLLM_KV_CACHE) or values.get(VLLM_KV_CACHE_OLD) or []

        def total(name: str) -> float | None:
            # A counter's samples come under its family's name with a TYPE line,
            # under the ``_total`` name without one.
            got = values.get(name, values.get(name + "_total"))
            return sum(got) if got is not None else None

        return PodMetrics(
            running=sum(values.get(VLLM_RUNNING, [])),
            waiting=sum(values.get(VLLM_WAITING, [])),
            kv_cache_utilization=_mean(kv),
            prompt_tokens_total=total(VLLM_PROMPT_TOKENS),
            generation_tokens_total=total(VLLM_GENERATION_TOKENS),
            ttft_count_total=total(VLLM_TTFT_COUNT),
            ttft_sum_total=total(VLLM_TTFT_SUM),
            ttft_buckets_total=tuple(sorted(ttft.items())) if ttft else None,
        )
    if engine == "triton":
        if TRITON_PENDING not in values:
            raise ScrapeError(f"no {TRITON_PENDING} in the pod's metrics")
        queue = values.get(TRITON_QUEUE_US)
        compute = values.get(TRITON_COMPUTE_US)
        return PodMetrics(
            waiting=sum(values[TRITON_PENDING]),
            gpu_utilization=_mean(values.get(TRITON_GPU_UTIL, [])),
            queue_us_total=sum(queue) if queue is not None else None,
            compute_us_total=sum(compute) if compute is not None else None,
        )
    raise ScrapeError(f"engine {engine!r} has no metrics to scrape; allowed: {', '.join(ENGINES)}")


def _new(previous: float | None, current: float | None) -> float:
    """What a counter gained between two scrapes (0: unknown, or it went back)."""
    if previous is None or current is None or current < previous:
        return 0.0
    return current - previous


def _new_buckets(
    previous: tuple[tuple[float, float], ...] | None,
    current: tuple[tuple[float, float], ...] | None,
) -> tuple[tuple[float, float], ...]:
    """What each bucket gained (nothing when the bounds changed or a count went back)."""
    if previous is None or current is None or len(previous) != len(current):
        return ()
    out = []
    for (bound_was, was), (bound, count) in zip(previous, current, strict=True):
        if bound != bound_was or count < was:
            return ()
        out.append((bound, count - was))
    return tuple(out)


def _with_rates(previous: PodMetrics | None, current: PodMetrics) -> PodMetrics:
    if previous is not None:
        current = replace(
            current,
            new_prompt_tokens=_new(previous.prompt_tokens_total, current.prompt_tokens_total),
            new_generation_tokens=_new(
                previous.generation_tokens_total, current.generation_tokens_total
            ),
            new_first_tokens=_new(previous.ttft_count_total, current.ttft_count_total),
            new_ttft_sum_s=_new(previous.ttft_sum_total, current.ttft_sum_total),
            new_ttft_buckets=_new_buckets(previous.ttft_buckets_total, current.ttft_buckets_total),
        )
    if (
        previous is None
        or previous.queue_us_total is None
        or previous.compute_us_total is None
        or current.queue_us_total is None
        or current.compute_us_total is None
    ):
        return current
    d_queue = current.queue_us_total - previous.queue_us_total
    d_compute = current.compute_us_total - previous.compute_us_total
    if d_queue < 0 or d_compute < 0:  # counters went back: the server restarted
        return current
    if d_compute == 0:
        # No work finished between scrapes: keep the last ratio, if any.
        return replace(current, queue_to_compute_ratio=previous.queue_to_compute_ratio)
    return replace(current, queue_to_compute_ratio=d_queue / d_compute)


@dataclass(slots=True)
class _PodState:
    last: PodMetrics | None = None
    last_ok_at: float | None = None
    last_error: str | None = None


@dataclass(slots=True)
class _TargetState:
    engine: str
    pods: dict[str, _PodState]


@dataclass(frozen=True, slots=True)
class _New:
    """What one target's pods scraped in a refresh counted that was new."""

    prompt_tokens: float = 0.0
    generated_tokens: float = 0.0
    first_tokens: float = 0.0
    ttft_s: float = 0.0
    ttft_buckets: tuple[tuple[float, float], ...] = ()

    def brought(self) -> Brought | None:
        """The counts the hub adds (``None``: nothing new)."""
        counted = any(count > 0 for _, count in self.ttft_buckets)
        if self.prompt_tokens > 0 or self.generated_tokens > 0 or counted:
            return Brought(
                served_prompt_tokens=self.prompt_tokens,
                generated_tokens=self.generated_tokens,
                ttft_new=self.ttft_buckets,
            )
        return None


def _new_in(target: _TargetState, refreshed_at: float | None) -> _New:
    """The new counts of the pods scraped in the refresh of ``refreshed_at`` only."""
    prompt = generated = firsts = ttft_s = 0.0
    buckets: dict[float, float] = {}
    for pod in target.pods.values():
        m = pod.last
        if m is None or pod.last_ok_at is None or pod.last_ok_at != refreshed_at:
            continue
        prompt += m.new_prompt_tokens
        generated += m.new_generation_tokens
        firsts += m.new_first_tokens
        ttft_s += m.new_ttft_sum_s
        for bound, count in m.new_ttft_buckets:
            buckets[bound] = buckets.get(bound, 0.0) + count
    return _New(prompt, generated, firsts, ttft_s, tuple(sorted(buckets.items())))


class ScrapeSettings(PolledSourceSettings):
    enabled: bool = Field(True, description="scrape ready pods' /metrics")
    interval_s: float = Field(2.0, gt=0, description="time between scrapes of every pod, seconds")
    timeout_s: float = Field(1.0, gt=0, description="timeout of one pod scrape, seconds")
    stale_after_s: float = Field(
        6.0, gt=0, description="a pod's values older than this are stale, seconds"
    )
    max_concurrent: int = Field(64, ge=1, description="scrapes in flight at once")

    def build(self, context: SourceContext) -> Polled | None:
        if not self.enabled:
            return None
        scraper = PodScraper(
            session=context.session,
            timeout_s=self.timeout_s,
            stale_after_s=self.stale_after_s,
            max_concurrent=self.max_concurrent,
        )
        return Polled(scraper, self.interval_s, 1.5 * self.interval_s + self.timeout_s)


class PodScraper:
    """Scrapes ready pods and answers reads from what it last got."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        timeout_s: float = 1.0,
        stale_after_s: float = 6.0,
        max_concurrent: int = 64,
        max_body_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        if timeout_s <= 0 or stale_after_s <= 0 or max_concurrent < 1:
            raise ValueError(
                "timeout_s and stale_after_s must be > 0 and max_concurrent >= 1, got "
                f"{timeout_s}, {stale_after_s}, {max_concurrent}"
            )
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._stale_after_s = stale_after_s
        self._limit = asyncio.Semaphore(max_concurrent)
        self._max_body_bytes = max_body_bytes
        self._targets: dict[str, _TargetState] = {}
        self._refreshed_at: float | None = None
        # What the latest refresh brought per vLLM target, kept until the next one.
        self._brought: dict[str, Brought] = {}

    @property
    def name(self) -> str:
        return SCRAPE

    @property
    def feeds(self) -> frozenset[SignalKind]:
        """Running and waiting requests, KV cache use, and GPU utilization where the
        server reports it (Triton's ``nv_gpu_utilization``)."""
        return frozenset(SignalKind)

    async def _fetch(self, pod: PodEndpoint, engine: str) -> PodMetrics:
        host = f"[{pod.ip}]" if ":" in pod.ip else pod.ip
        url = f"http://{host}:{pod.metrics_port}/metrics"
        async with self._limit:
            try:
                async with self._session.get(url, timeout=self._timeout) as resp:
                    if resp.status != 200:
                        raise ScrapeError(f"GET {url}: HTTP {resp.status}")
                    body = await resp.content.read(self._max_body_bytes + 1)
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise ScrapeError(f"GET {url}: {type(exc).__name__}: {exc}") from exc
        if len(body) > self._max_body_bytes:
            raise ScrapeError(f"GET {url}: body over {self._max_body_bytes} bytes")
        return parse_pod_metrics(body.decode("utf-8", "replace"), engine=engine)

    async def _scrape(self, state: _PodState, pod: PodEndpoint, engine: str, now: float) -> None:
        try:
            got = await self._fetch(pod, engine)
        except ScrapeError as exc:
            if state.last_error != str(exc):
                log.info("scrape of pod %s failed: %s", pod.name, exc)
            state.last_error = str(exc)
            return
        state.last = _with_rates(state.last, got)
        state.last_ok_at = now
        state.last_error = None

    async def refresh(self, targets: Sequence[TargetPods], *, now: float) -> None:
        jobs = []
        seen: dict[str, _TargetState] = {}
        for target in targets:
            old = self._targets.get(target.key)
            pods: dict[str, _PodState] = {}
            for pod in target.pods:
                state = old.pods.get(pod.name) if old is not None else None
                pods[pod.name] = state if state is not None else _PodState()
                if target.engine in ENGINES:
                    jobs.append(self._scrape(pods[pod.name], pod, target.engine, now))
            seen[target.key] = _TargetState(engine=target.engine, pods=pods)
        # Forget targets and pods no longer listed (gone or no longer ready).
        self._targets = seen
        self._refreshed_at = now
        await asyncio.gather(*jobs)
        self._brought = {}
        for key, listed in seen.items():
            brought = _new_in(listed, now).brought() if listed.engine == "vllm" else None
            if brought is not None:
                self._brought[key] = brought

    def read(self, key: str, *, now: float) -> SourceReading | None:
        target = self._targets.get(key)
        if target is None:
            # Never refreshed: we know nothing yet, which is not "idle".
            return SourceReading(fresh=False, reporters=0)
        if target.engine not in ENGINES:
            return None
        fresh = True
        reporters = 0
        running = waiting = 0.0
        per_pod: list[tuple[float, float]] = []
        kv: list[float] = []
        gpu: list[float] = []
        ratios: list[float] = []
        load: dict[str, float] = {}
        for name, pod in target.pods.items():
            if pod.last_ok_at is None or now - pod.last_ok_at > self._stale_after_s:
                fresh = False
            m = pod.last
            if m is None:
                continue
            reporters += 1
            running += m.running
            waiting += m.waiting
            per_pod.append((m.running, m.waiting))
            load[name] = m.running + m.waiting
            if m.kv_cache_utilization is not None:
                kv.append(m.kv_cache_utilization)
            if m.gpu_utilization is not None:
                gpu.append(m.gpu_utilization)
            if m.queue_to_compute_ratio is not None:
                ratios.append(m.queue_to_compute_ratio)
        has_data = reporters > 0 or not target.pods
        kv_mean, gpu_mean, ratio_mean = _mean(kv), _mean(gpu), _mean(ratios)
        signals: dict[SignalKind, float] = {}
        observed: dict[str, float] = {}
        if has_data:
            signals[SignalKind.CONCURRENCY] = running + waiting
            signals[SignalKind.QUEUE_DEPTH] = waiting
            observed = {"server_running": running, "server_waiting": waiting}
        if kv_mean is not None:
            signals[SignalKind.KV_CACHE_UTILIZATION] = kv_mean
            observed["server_kv_cache_utilization"] = kv_mean
        if gpu_mean is not None:
            signals[SignalKind.GPU_UTILIZATION] = gpu_mean
            observed["server_gpu_utilization"] = gpu_mean
        if ratio_mean is not None:
            observed["server_queue_to_compute_ratio"] = ratio_mean
        if has_data and target.engine == "vllm":
            new = _new_in(target, self._refreshed_at)
            observed["server_new_prompt_tokens"] = new.prompt_tokens
            observed["server_new_generation_tokens"] = new.generated_tokens
            if new.first_tokens > 0:
                observed["server_ttft_mean_s"] = new.ttft_s / new.first_tokens
        return SourceReading(
            fresh=fresh,
            reporters=reporters,
            signals=signals,
            busy=running + waiting > 0,
            pod_load=load,
            # Requests waiting on a server have no first token yet.
            levels=Levels(
                running=running if has_data else None,
                server_waiting=waiting if has_data else None,
                awaiting_first_token=waiting if has_data else None,
                kv_cache_utilization=kv_mean,
                running_least=min((r for r, _ in per_pod), default=None),
                waiting_least=min((w for _, w in per_pod), default=None),
            ),
            brought=self._brought.get(key) if has_data else None,
            observed=observed,
        )
