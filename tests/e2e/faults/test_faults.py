"""Every request gets an answer while faults strike (docs/architecture.md, "Working rules").

Open-loop streaming load goes through TWO real activators on the sandbox
(real scaler, real fake-vLLM replicas) while every fault strikes, one after
another, in one run; each fault's requests are a phase of their own, so a
failure names the fault it followed. Every request's fate is counted
(:mod:`fates`) and printed as a table (``pytest -s``, and in every assertion
message).

One run rather than one stack per fault: each fault leaves the stack as it
found it (two ready replicas, both activators serving), so striking them in
turn proves what ten separate runs proved, every rule below asserted per
phase, for one stack's start-up and one load client.

What must hold, everywhere: no request ends without an answer (no
``no_answer``, no ``refused``, no error without the JSON body); a stream is
cut only by the SIGKILL of the replica serving it (so only in that
scenario, only streams in progress when it struck, ending right after it);
clean errors only where they are the design:

- ``503 buffer_full`` past ``max_buffered``, exactly the overflow;
- ``503 draining`` (the "shut down before a replica became ready" answer)
  for the requests an activator still held when its drain ended, only from
  that activator;
- ``502 upstream_failed`` only for a request whose bytes had reached the
  replica that was SIGKILLed (its row in docs/statuses.md), at the kill.

The graceful faults (a pod deleted, a node preempted with notice, the
scaler killed and restarted, the API server unavailable, with a replica
deleted and an activator restarted meanwhile, watches cut with compaction,
an activator SIGTERMed with streams in flight) fail none.

The outage lasts until an activator restarted during it has been up, and
not ready, for two seconds (about eight seconds in all): every list and
watch fails and retries meanwhile while the activators keep serving from
what they know. Its length changes nothing else: a fixed 30 s only made the
suite slower.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from activator.holding.gate import BufferFull, DrainEnded
from activator.statuses import ERROR_STATUS, UpstreamFailed
from tests.e2e.faults.fates import Record, Tally
from tests.e2e.faults.harness import (
    DRAIN_GRACE_S,
    DRAIN_S,
    ENDPOINTS_DROP_S,
    MAX_BUFFERED,
    FaultStack,
    example_model,
    fault_stack,
    report,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RATE = 8.0  # requests per second, open loop, over both activators
# The outage ends once an activator restarted during it has been seen up and not
# ready for NOT_READY_FOR_S; the cap only bounds a run that fails before that.
OUTAGE_CAP_S = 60.0
NOT_READY_FOR_S = 2.0
NOTICE_S = 1.0
BUFFER_FULL = ERROR_STATUS[BufferFull]
DRAIN_ENDED = ERROR_STATUS[DrainEnded]
UPSTREAM_FAILED = ERROR_STATUS[UpstreamFailed]
# A stream cut by a SIGKILL ends this soon after it (the activator relays the reset).
CUT_WITHIN_S = 2.0
MIN_SCALE = "autoscaling.tidal.dev/min-scale"
STARTUP_DELAY = "sandbox.tidal.dev/startup-delay"


def unanswered(tally: Tally) -> list[Record]:
    return [r for r in tally.records if r.fate in ("no_answer", "refused", "bad_error")]


# A SIGKILL as the client's clock sees it: from just before the test asked for it to
# just after the sandbox said it sent the signal.
Kill = tuple[float, float]
# The process dies, and the kernel closes its listener, a moment after the signal is
# sent: a request that connects meanwhile lands in the dying replica's backlog.
DYING_S = 0.5


def killed_by(record: Record, kills: list[Kill]) -> bool:
    """Whether ``record`` was in progress at one of the SIGKILLs and ended right after it."""
    return any(
        record.sent_s < done + DYING_S and asked <= record.ended_s <= done + CUT_WITHIN_S
        for asked, done in kills
    )


def assert_fates(
    tally: Tally,
    *,
    kills: list[Kill] | None = None,
    drained_activator: int | None = None,
    drain_ended_at: float | None = None,
    buffer_full: int = 0,
) -> str:
    """The rules of the module docstring; the table is the message of every failure."""
    table = report(tally)
    kills = kills or []
    assert tally.records, "no request was sent"
    assert not unanswered(tally), table
    for record in tally.of("cut"):
        assert killed_by(record, kills), f"#{record.index} cut, not by a SIGKILL:\n{table}"
    for record in tally.of("error"):
        key = (record.status, record.code, record.message)
        if key == (BUFFER_FULL.status, BUFFER_FULL.code, BUFFER_FULL.message):
            continue
        if key == (DRAIN_ENDED.status, DRAIN_ENDED.code, DRAIN_ENDED.message):
            assert record.activator == drained_activator, f"#{record.index}:\n{table}"
            assert drain_ended_at is not None
            # At the drain's end, not before it (a loaded machine may be late).
            late = record.ended_s - drain_ended_at
            assert -0.2 < late < 2.0, f"#{record.index} {late:+.2f}s from the drain end:\n{table}"
            continue
        if (record.status, record.code) == (UPSTREAM_FAILED.status, UPSTREAM_FAILED.code):
            assert killed_by(record, kills), f"#{record.index} 502, no SIGKILL:\n{table}"
            continue
        raise AssertionError(f"#{record.index}: an error outside the design:\n{table}")
    assert len([r for r in tally.of("error") if r.code == BUFFER_FULL.code]) == buffer_full, table
    return table


def assert_all_running(fs: FaultStack) -> None:
    for process in (*fs.activators, *fs.stack.scalers):
        assert process.running, f"tidal {process.name} died:\n{process.tail()}"


# --- the faults, struck one after another in the run below -----------------------------


async def sigkill_replica(fs: FaultStack, kills: list[Kill]) -> None:
    asked = time.monotonic()
    await fs.kill_replica()
    kills.append((asked, time.monotonic()))
    await asyncio.sleep(3)


async def delete_replica(fs: FaultStack, kills: list[Kill]) -> None:
    fs.delete_replica()
    await asyncio.sleep(0.5)
    await fs.wait_ready(2)


async def preempt_node(fs: FaultStack, kills: list[Kill]) -> None:
    preemption = await fs.preempt_node_of_a_replica(NOTICE_S)
    result = await asyncio.wait_for(preemption, 60)
    assert result["pods_deleted"], result
    await fs.wait_ready(2)


async def kill_and_restart_scaler(fs: FaultStack, kills: list[Kill]) -> None:
    await fs.kill_and_restart_scaler(down_s=2.0)


async def api_server_unavailable(fs: FaultStack, kills: list[Kill]) -> None:
    # Two replicas, so one is left that the activators know when the other goes: a
    # replica started during the outage cannot be known until the API is back.
    await fs.wait_ready(2)
    await fs.api_unavailable(OUTAGE_CAP_S)
    try:
        await asyncio.sleep(2.0)
        # A replica goes while no one can watch: the activators still list it until the
        # API is back, and must send nothing there that fails.
        fs.delete_replica()
        # An activator restarted now can list no target: it must not say it is ready
        # (and be sent requests it could only answer 404) before the API is back.
        load = fs.loads[-1]
        process = await fs.sigterm_activator(0, load)
        assert process.proc is not None
        assert await asyncio.wait_for(process.proc.wait(), 15) == 0, process.tail()
        restart = asyncio.create_task(fs.restart_activator(0, load), name="restart")
        try:
            await fs.wait_answering(0)
            await asyncio.sleep(NOT_READY_FOR_S)
            assert not restart.done(), "an activator was ready while it could list nothing"
            assert await fs.readyz(0) == 503, "an activator was ready while it could list nothing"
        finally:
            await fs.api_back()
            await restart
    finally:
        await fs.api_back()
    await fs.wait_ready(2)


async def watches_cut_with_compaction(fs: FaultStack, kills: list[Kill]) -> None:
    assert fs.cut_watches_with_compaction() > 0, "no watch was open to cut"
    await asyncio.sleep(1.0)
    # After the re-lists, a change must still reach the activators: a replica goes.
    fs.delete_replica()
    await asyncio.sleep(0.5)
    await fs.wait_ready(2)


async def sigterm_and_restart_activator(fs: FaultStack, kills: list[Kill]) -> None:
    # Streams (under 1 s) in progress at the SIGTERM finish within its drain.
    process = await fs.sigterm_activator(1, fs.loads[-1])
    assert process.proc is not None
    assert await asyncio.wait_for(process.proc.wait(), 15) == 0, process.tail()
    await fs.restart_activator(1, fs.loads[-1])


# --- all of it in one run ------------------------------------------------------------


@pytest.mark.timeout(300)
async def test_all_faults_in_one_run(tmp_path: Path) -> None:
    async with fault_stack(tmp_path, example_model(min_scale=2)) as fs:
        await fs.wait_ready(2)
        load = await fs.load(rate=RATE)
        kills: list[Kill] = []

        async def phase(name: str) -> None:
            await load.send(f"phase {name}")

        await phase("steady")
        await asyncio.sleep(1.5)
        await phase("watches-cut")
        await watches_cut_with_compaction(fs, kills)
        await phase("replica-deleted")
        await delete_replica(fs, kills)
        await phase("node-preempted")
        await preempt_node(fs, kills)
        # The SIGKILLed replica stays down for the kubelet's back-off (10 s); the
        # outage starts once it is back (it needs two replicas).
        await phase("replica-sigkilled")
        await sigkill_replica(fs, kills)
        await phase("scaler-restarted")
        await kill_and_restart_scaler(fs, kills)
        await phase("activator-restarted")
        await sigterm_and_restart_activator(fs, kills)
        await phase("api-unavailable")
        await api_server_unavailable(fs, kills)
        assert_all_running(fs)

        # Quiet, then to zero: held requests need a model with no ready replica, and
        # a cold start longer than the drain (grace + DRAIN_S) to be held past it.
        await load.send("rate 0")
        fs.set_annotation(MIN_SCALE, "0")
        await fs.wait_zero()
        await fs.wait_activators_see(0)
        fs.set_annotation(STARTUP_DELAY, "5s", pods=True)
        await phase("held")
        overflow = 6
        await load.send(f"burst {2 * MAX_BUFFERED + overflow}")
        await asyncio.sleep(0.5)
        process = await fs.sigterm_activator(0, load)
        # The SIGTERM was ENDPOINTS_DROP_S ago.
        drain_ended_at = time.monotonic() - ENDPOINTS_DROP_S + DRAIN_GRACE_S + DRAIN_S
        assert process.proc is not None
        assert await asyncio.wait_for(process.proc.wait(), 15) == 0, process.tail()
        await fs.wait_ready(1)
        await fs.restart_activator(0, load)

        await fs.wait_zero()
        await fs.wait_activators_see(0)
        await phase("first")
        await load.send("burst 1")
        await fs.wait_ready(1)
        await asyncio.sleep(1.0)
        assert process.running
        tally = Tally("all faults in one run", await load.finish())
    assert_fates(
        tally,
        kills=kills,
        drained_activator=0,
        drain_ended_at=drain_ended_at,
        buffer_full=overflow,
    )
    for name in ("steady", "watches-cut", "replica-deleted", "node-preempted", "scaler-restarted",
                 "api-unavailable", "activator-restarted", "first"):  # fmt: skip
        # A stream sent in the phase before the SIGKILL may be cut by it (checked above).
        fates = {r.fate for r in tally.records if r.phase == name and not killed_by(r, kills)}
        assert fates == {"completed"}, f"{name}: {fates}\n{tally.table()}"
    ended = [r for r in tally.of("error") if r.message == DRAIN_ENDED.message]
    assert len(ended) == MAX_BUFFERED, tally.table()
