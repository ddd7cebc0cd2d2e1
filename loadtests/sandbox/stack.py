"""``SandboxStack``: the emulated cluster with Tidal's scaler and activator running on it.

What ``tidal sandbox up``, ``tidal demo`` and the end-to-end tests run: a
:class:`SandboxCluster`, then the scaler and the activator as real processes
(``tidal scaler``, ``tidal activator``) that reach the cluster only through
its kubeconfig, exactly as they would reach a real one, and optionally the
example model (a Deployment at zero replicas and its Service).

Addresses: the cluster holds a loopback block 127.X.0.0/16 of its own; the
scaler listens on 127.X.0.2, the activator on 127.X.0.3, Prometheus (when
asked for) on 127.X.0.4 and further scalers (:meth:`SandboxStack.add_scaler`)
on 127.X.0.5 and up, and an endpoint picker (an InferencePool's) on
127.X.0.250, so two stacks on one machine never collide and no port needs
to be discovered. Further activators (:meth:`SandboxStack.add_activator`)
share 127.X.0.3 on the next ports (data and admin port + 1, + 2, ...), as
activator replicas side by side that share nothing but the scaler.

Several scalers: each scaler process has its own identity (``scaler-<n>``,
the name it puts in the Lease) and its own kubeconfig user
(``tidal-scaler-<n>``), so the API server's audit log
(``stack.cluster.api.audit``) says which of them wrote what.

GPU metrics: with ``StackSettings(prometheus=<binary>)`` the cluster runs its
DCGM-like exporter (every fake-server pod, port 9400 on the API host), a real
Prometheus scrapes it every second, and the scaler gets ``--prometheus-url``.

Lifecycle: each process gets its own session (Ctrl-C at a terminal reaches
only the stack, which then stops them in order: the activator first, so it
drains, then the scaler, then the cluster) and a parent-death signal, so
nothing outlives the stack even when it is killed outright.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import aiohttp

from loadtests.sandbox.cluster.cluster import SandboxCluster
from loadtests.sandbox.cluster.defaults import apply_defaults
from loadtests.sandbox.cluster.nodes import DEFAULT_POOL, NodeSpec
from loadtests.sandbox.cluster.quantity_fields import canonicalize_quantities
from loadtests.sandbox.cluster.resources import by_group_version_plural
from loadtests.sandbox.cluster.simple_launcher import die_with_parent
from loadtests.sandbox.example import ExampleModel
from loadtests.sandbox.prometheus import PrometheusProcess

__all__ = ["SandboxStack", "StackSettings", "TidalProcess"]

DEPLOYMENTS = by_group_version_plural("apps", "v1", "deployments")
SERVICES = by_group_version_plural("", "v1", "services")
PODS = by_group_version_plural("", "v1", "pods")


@dataclass(frozen=True, slots=True)
class StackSettings:
    example: ExampleModel | None = field(default_factory=ExampleModel)
    scaler_args: tuple[str, ...] = ()
    activator_args: tuple[str, ...] = ()
    scaler_port: int = 8090
    activator_port: int = 8080
    activator_admin_port: int = 9091
    start_timeout_s: float = 60.0
    stop_timeout_s: float = 30.0
    rbac: bool = False
    # Extra environment for every scaler (TIDAL_SCALER_LEADER__LEASE_DURATION_S=...).
    scaler_env: Mapping[str, str] = field(default_factory=dict)
    # Start the activator (a scaler-only test can do without it).
    activator: bool = True
    # Path of a Prometheus binary: run the DCGM exporter and Prometheus, and point
    # the scaler at it. None: neither.
    prometheus: str | None = None
    prometheus_port: int = 9090
    # The cluster's nodes (None: the default pool), e.g. a time-sliced GPU node.
    nodes: Sequence[NodeSpec] | None = None


class TidalProcess:
    """One ``tidal`` subcommand running as a child process, logging to a file."""

    def __init__(self, name: str, argv: Sequence[str], *, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = env
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "scaler",
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    async def stop(self, timeout_s: float) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; the exit status."""
        if self.proc is None:
            return None
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), timeout_s)
        except TimeoutError:
            self.signal(signal.SIGKILL)
            await self.proc.wait()
        return self.proc.returncode

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class SandboxStack:
    def __init__(self, directory: Path, settings: StackSettings | None = None) -> None:
        self.directory = directory
        self.settings = settings or StackSettings()
        self.cluster = SandboxCluster(
            directory, rbac=self.settings.rbac, nodes=self.settings.nodes or DEFAULT_POOL
        )
        self.token = secrets.token_urlsafe(24)
        self.scaler: TidalProcess | None = None
        self.scalers: list[TidalProcess] = []  # the stack's own first, then add_scaler's
        self.activator: TidalProcess | None = None
        self.activators: list[TidalProcess] = []  # the stack's own first, then add_activator's
        self.prometheus: PrometheusProcess | None = None

    # --- addresses ---------------------------------------------------------------

    def _host(self, last_octet: int) -> str:
        block = self.cluster.addresses
        if block is None:
            raise RuntimeError("the sandbox cluster is not started")
        return block.api_host.rsplit(".", 1)[0] + f".{last_octet}"

    def scaler_host(self, index: int = 0) -> str:
        """Scaler ``index``'s address: 127.X.0.2 for the first, 127.X.0.5 and up after."""
        return self._host(2 if index == 0 else 4 + index)

    @property
    def picker_host(self) -> str:
        """Where an endpoint picker of the stack's (``tidal sandbox epp``) listens: 127.X.0.250."""
        return self._host(250)

    def scaler_url_of(self, index: int) -> str:
        return f"http://{self.scaler_host(index)}:{self.settings.scaler_port}"

    @property
    def scaler_url(self) -> str:
        return self.scaler_url_of(0)

    def activator_url_of(self, index: int) -> str:
        """Activator ``index``'s data URL: the stack's own is 0, add_activator's 1 and up."""
        return f"http://{self._host(3)}:{self.settings.activator_port + index}"

    def activator_admin_url_of(self, index: int) -> str:
        return f"http://{self._host(3)}:{self.settings.activator_admin_port + index}"

    @property
    def activator_url(self) -> str:
        return self.activator_url_of(0)

    @property
    def activator_admin_url(self) -> str:
        return self.activator_admin_url_of(0)

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    # --- lifecycle -----------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # The children must not pick up settings meant for another instance.
        for key in list(env):
            if key.startswith(("TIDAL_SCALER_", "TIDAL_ACTIVATOR_")):
                del env[key]
        return env

    def _scaler_process(
        self, index: int, args: Sequence[str], env: Mapping[str, str] | None = None
    ) -> TidalProcess:
        """Scaler number ``index`` (0: the stack's own), with its own identity and user."""
        assert self.cluster.api is not None
        name = f"scaler-{index}"
        kubeconfig = self.cluster.api.write_kubeconfig(
            self.directory / f"kubeconfig-{name}",
            token=self.cluster.api.mint_user_token(f"tidal-{name}", groups=("system:masters",)),
        )
        environment = self._env()
        # The token goes in the environment: a flag would show it in ps.
        environment["TIDAL_SCALER_TOKEN"] = self.token
        environment.update(self.settings.scaler_env)
        environment.update(env or {})
        return TidalProcess(
            "scaler" if index == 0 else name,
            [
                "scaler",
                "--host",
                self.scaler_host(index),
                "--port",
                str(self.settings.scaler_port),
                "--identity",
                name,
                "--kubeconfig",
                str(kubeconfig),
                *(["--prometheus-url", self.prometheus.url] if self.prometheus else []),
                *args,
            ],
            env=environment,
            # The first keeps the name the stack always gave its scaler's log.
            log=self.directory
            / "logs"
            / ("tidal-scaler.log" if index == 0 else f"tidal-{name}.log"),
        )

    async def start(self) -> None:
        try:
            self.cluster.gpu_exporter_wanted = self.settings.prometheus is not None
            await self.cluster.start()
            if self.settings.example is not None:
                self.apply_example(self.settings.example)
            if self.settings.prometheus is not None:
                exporter = self.cluster.gpu_exporter
                assert exporter is not None
                self.prometheus = PrometheusProcess(
                    self.settings.prometheus,
                    self.directory / "prometheus",
                    host=self._host(4),
                    port=self.settings.prometheus_port,
                    targets=[f"{exporter.exporter.host}:{exporter.exporter.port}"],
                )
                await self.prometheus.start(timeout_s=self.settings.start_timeout_s)
            self.scaler = self._scaler_process(0, self.settings.scaler_args)
            self.scalers = [self.scaler]
            if self.settings.activator:
                self.activator = self._activator_process(0)
                self.activators = [self.activator]
            await self.scaler.start()
            if self.activator is not None:
                await self.activator.start()
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise

    def _activator_process(self, index: int, args: Sequence[str] = ()) -> TidalProcess:
        """Activator number ``index`` (0: the stack's own) on the stack's activator address."""
        return TidalProcess(
            "activator" if index == 0 else f"activator-{index}",
            [
                "activator",
                "--host",
                self._host(3),
                "--port",
                str(self.settings.activator_port + index),
                "--admin-host",
                self._host(3),
                "--admin-port",
                str(self.settings.activator_admin_port + index),
                "--scaler-url",
                self.scaler_url,
                *self.settings.activator_args,
                *args,
            ],
            # In the environment, not a flag: flags are visible in ps.
            env={**self._env(), "TIDAL_ACTIVATOR_SCALER_TOKEN": self.token},
            log=self.directory
            / "logs"
            / ("tidal-activator.log" if index == 0 else f"tidal-activator-{index}.log"),
        )

    async def add_activator(self, args: Sequence[str] = ()) -> TidalProcess:
        """Start one more activator (the next data and admin ports) and wait until it serves."""
        index = len(self.activators)
        process = self._activator_process(index, args)
        self.activators.append(process)
        await process.start()
        await self._wait_for(process, f"{self.activator_admin_url_of(index)}/readyz")
        return process

    async def restart(self, process: TidalProcess) -> None:
        """Start ``process`` again (after it exited or was killed) and wait until it is ready."""
        if process.running:
            raise RuntimeError(f"tidal {process.name} is still running; stop or kill it first")
        if process in self.activators:
            url = f"{self.activator_admin_url_of(self.activators.index(process))}/readyz"
        elif process in self.scalers:
            url = f"{self.scaler_url_of(self.scalers.index(process))}/readyz"
        else:
            raise ValueError(f"tidal {process.name} is not one of this stack's processes")
        await process.start()
        await self._wait_for(process, url)

    async def add_scaler(
        self, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None
    ) -> TidalProcess:
        """Start one more scaler replica (on the next address) and wait until it serves."""
        index = len(self.scalers)
        process = self._scaler_process(index, [*self.settings.scaler_args, *args], env)
        self.scalers.append(process)
        await process.start()
        await self._wait_for(process, f"{self.scaler_url_of(index)}/readyz")
        return process

    def apply_example(self, example: ExampleModel) -> None:
        assert DEPLOYMENTS is not None
        assert SERVICES is not None
        # Written straight into the store, so default them and write their
        # quantities as the API server would: otherwise the first write
        # through the API (the scaler's /scale patch) fills the template's
        # defaults and starts a rollout.
        for rtype, obj in ((SERVICES, example.service()), (DEPLOYMENTS, example.deployment())):
            apply_defaults(obj, rtype.kind, creating=True)
            canonicalize_quantities(obj, group=rtype.group, version=rtype.version, kind=rtype.kind)
            self.cluster.store.create(rtype, obj)

    async def _wait_ready(self) -> None:
        assert self.scaler is not None
        await self._wait_for(self.scaler, f"{self.scaler_url}/readyz")
        if self.activator is not None:
            await self._wait_for(self.activator, f"{self.activator_admin_url}/readyz")

    async def _wait_for(self, process: TidalProcess, url: str) -> None:
        deadline = asyncio.get_running_loop().time() + self.settings.start_timeout_s
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                if not process.running:
                    raise RuntimeError(
                        f"tidal {process.name} exited during start; its log "
                        f"({process.log}) ends with:\n{process.tail()}"
                    )
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.get(url) as response:
                        if response.status == 200:
                            return
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(
                        f"tidal {process.name} was not ready at {url} within "
                        f"{self.settings.start_timeout_s:.0f}s; its log ends with:\n"
                        f"{process.tail()}"
                    )
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        # Activators first: they drain what they hold while the model is still up.
        for process in (*self.activators, *self.scalers):
            await process.stop(self.settings.stop_timeout_s)
        if self.prometheus is not None:
            await self.prometheus.stop()
        await self.cluster.stop()

    async def __aenter__(self) -> SandboxStack:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- observation ---------------------------------------------------------------

    def deployment_state(self, name: str, namespace: str = "default") -> tuple[int, int, int]:
        """(spec.replicas, status.readyReplicas, pods that exist) straight from the store."""
        assert DEPLOYMENTS is not None
        assert PODS is not None
        obj = self.cluster.store.peek(DEPLOYMENTS, namespace, name)
        if obj is None:
            return (0, 0, 0)
        desired = int(obj.get("spec", {}).get("replicas", 0) or 0)
        ready = int(obj.get("status", {}).get("readyReplicas", 0) or 0)
        labels = obj.get("spec", {}).get("selector", {}).get("matchLabels", {})
        pods, _ = self.cluster.store.list(PODS, namespace=namespace, copy=False)
        count = sum(
            1
            for p in pods
            if all(p["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())
        )
        return (desired, ready, count)
