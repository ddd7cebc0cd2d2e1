"""A pod's main container as processes: each start, its readiness, its stop, its restarts.

Each run starts the process through the
:class:`~loadtests.sandbox.servers.spec.Launcher`, with the real kubelet's
``Pulled``, ``Created`` and ``Started`` Events, probes it for readiness
(:mod:`~loadtests.sandbox.cluster.controllers.kubelet.probes`) while it
runs, and ends when it exits or the pod is deleted: then SIGTERM, the grace
period, SIGKILL (:mod:`~loadtests.sandbox.cluster.controllers.kubelet.termination`).

Main decision: a process that exits is restarted as ``restartPolicy`` says
(``Always``; ``OnFailure`` and ``Never`` as named) after an exponential
back-off, ``backoff_base_s`` (10 s, as the real one) doubling to
``backoff_cap_s`` (5 min), shown as ``waiting: CrashLoopBackOff`` with the
last exit in ``lastState``; ``restartCount`` counts the restarts. A process
that ran ``backoff_reset_s`` (10 min) resets the back-off. A launcher that
cannot start the process counts as an exit with code 128 (``StartError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

from loadtests.sandbox.cluster.controllers.base import Key, Obj
from loadtests.sandbox.cluster.controllers.kubelet.pod_status import PodStatus, exit_reason
from loadtests.sandbox.cluster.controllers.kubelet.probes import Probe, check, probe_for
from loadtests.sandbox.cluster.controllers.kubelet.settings import KubeletSettings
from loadtests.sandbox.cluster.controllers.kubelet.termination import Termination
from loadtests.sandbox.cluster.store import rfc3339
from loadtests.sandbox.servers.spec import Launcher, ServerProcess, ServerSpec

__all__ = ["ContainerRuns"]

log = logging.getLogger("tidal.sandbox.kubelet")

# One run's end: (exit code, reason, when it started, loop time just after the start).
_Ended = tuple[int, str, str, float]


class ContainerRuns:
    """Runs the pod's main container until the pod is deleted or it exits for good."""

    def __init__(
        self,
        *,
        key: Key,
        pod: Obj,
        container: Obj,
        spec: ServerSpec,
        launcher: Launcher,
        ip: str,
        status: PodStatus,
        termination: Termination,
        settings: KubeletSettings,
    ) -> None:
        self._key = key
        self._pod = pod
        self._container = container
        self._name = self._container.get("name", "main")
        self._spec = spec
        self._launcher = launcher
        self._ip = ip
        self._status = status
        self._termination = termination
        self._settings = settings
        self._proc: ServerProcess | None = None
        self._ready = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def kill(self) -> bool:
        """SIGKILL the running process, if one runs (it restarts with back-off)."""
        if self._proc is None:
            return False
        self._proc.kill()
        return True

    async def reap(self) -> None:
        """Kill the process, if one runs, and wait until it is gone."""
        if self._proc is not None:
            self._proc.kill()
            with contextlib.suppress(ProcessLookupError, asyncio.CancelledError):
                await asyncio.shield(self._proc.wait())

    async def run(self) -> None:
        policy = self._pod.get("spec", {}).get("restartPolicy", "Always")
        crashes = 0
        last: Obj | None = None
        loop = asyncio.get_running_loop()
        while not self._termination.requested:
            ended = await self._run_once(last)
            if ended is None:  # the pod was deleted: its terminal status is written
                return
            code, reason, started_at, began = ended
            last = {
                "terminated": {
                    "exitCode": code,
                    "reason": reason,
                    "startedAt": started_at,
                    "finishedAt": rfc3339(self._status.now()),
                }
            }
            if policy == "Never" or (policy == "OnFailure" and code == 0):
                self._ready = False
                current = self._status.current() or self._pod
                self._status.publish(
                    phase="Succeeded" if code == 0 else "Failed",
                    main=self._status.main_status(current, state=last, ready=False, started=False),
                    ready=False,
                )
                await self._termination.wait()
                self._status.finalize(exit_code=code, reason=reason, started_at=started_at)
                return
            if loop.time() - began >= self._settings.backoff_reset_s:
                crashes = 0
            crashes += 1
            if await self._back_off(crashes, last):
                self._status.finalize(exit_code=code, reason=reason, started_at=started_at)
                return
            self._status.restarted()

    async def _run_once(self, last: Obj | None) -> _Ended | None:
        """Start the process and run it to its exit; None when the pod was deleted meanwhile."""
        loop = asyncio.get_running_loop()
        try:
            self._proc = await self._launcher.start(self._spec)
        except Exception as exc:  # the launcher could not start it: a start error
            log.warning("pod %s/%s: start failed: %s", *self._key, exc)
            return 128, "StartError", rfc3339(self._status.now()), loop.time()
        began = loop.time()
        started_at = rfc3339(self._status.now())
        cid = f"containerd://{uuid.uuid4().hex}"
        if self._status.restarts == 0:
            image = self._container.get("image", "")
            self._status.event(
                "Normal", "Pulled", f'Container image "{image}" already present on machine'
            )
        self._status.event("Normal", "Created", f"Created container: {self._name}")
        self._status.event("Normal", "Started", f"Started container {self._name}")
        running = {"running": {"startedAt": started_at}}
        current = self._status.current() or self._pod
        self._status.publish(
            phase="Running",
            main=self._status.main_status(
                current, state=running, ready=False, started=True, last=last, container_id=cid
            ),
            ready=False,
        )
        probe = probe_for(
            self._container,
            ip=self._ip or self._spec.host,
            port=self._spec.port,
            settings=self._settings,
        )
        probing = asyncio.create_task(self._probe_loop(probe, running, last, cid))
        exited = asyncio.ensure_future(self._proc.wait())
        terminating = asyncio.create_task(self._termination.wait())
        try:
            await asyncio.wait({exited, terminating}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                self._status.event("Normal", "Killing", f"Stopping container {self._name}")
                await self._stop(exited)
        finally:
            terminating.cancel()
            probing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probing
            if not exited.done():
                exited.cancel()
        code, reason = exit_reason(exited.result())
        self._proc = None
        if self._termination.requested:
            self._status.finalize(
                exit_code=code, reason=reason, started_at=started_at, container_id=cid
            )
            return None
        return code, reason, started_at, began

    async def _back_off(self, crashes: int, last: Obj) -> bool:
        """Show CrashLoopBackOff and wait out the back-off; whether the pod was deleted."""
        meta = self._pod["metadata"]
        settings = self._settings
        delay_s = min(settings.backoff_cap_s, settings.backoff_base_s * 2 ** (crashes - 1))
        shown = f"{delay_s:g}s" if delay_s < 60 else f"{delay_s / 60:g}m0s"
        message = (
            f"back-off {shown} restarting failed container={self._name} "
            f"pod={meta['name']}_{meta['namespace']}({meta['uid']})"
        )
        waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        current = self._status.current() or self._pod
        self._status.publish(
            phase="Running",
            main=self._status.main_status(
                current, state=waiting, ready=False, started=False, last=last
            ),
            ready=False,
        )
        self._status.event(
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {self._name} in pod "
            f"{meta['name']}_{meta['namespace']}({meta['uid']})",
        )
        return await self._termination.wait_at_most(delay_s)

    async def _stop(self, exited: asyncio.Future[int]) -> None:
        """SIGTERM, then SIGKILL once the grace period is over (it may shrink meanwhile)."""
        assert self._proc is not None
        self._proc.terminate()
        await self._termination.grace_over(exited)
        if not exited.done():
            self._proc.kill()
            await asyncio.wait({exited})

    async def _probe_loop(self, probe: Probe, running: Obj, last: Obj | None, cid: str) -> None:
        await asyncio.sleep(probe.initial_delay_s)
        successes = failures = 0
        self._ready = False
        while True:
            ok, why = await check(probe)
            if ok:
                successes, failures = successes + 1, 0
                flip = not self._ready and successes >= probe.success_threshold
            else:
                failures, successes = failures + 1, 0
                flip = self._ready and failures >= probe.failure_threshold
                if probe.explicit:
                    self._status.event("Warning", "Unhealthy", f"Readiness probe failed: {why}")
            if flip:
                self._ready = not self._ready
                pod = self._status.current()
                if pod is None:
                    return
                main = self._status.main_status(
                    pod,
                    state=running,
                    ready=self._ready,
                    started=True,
                    last=last,
                    container_id=cid,
                )
                self._status.publish(phase="Running", main=main, ready=self._ready)
            await asyncio.sleep(probe.period_s)
