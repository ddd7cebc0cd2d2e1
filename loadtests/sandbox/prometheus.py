"""A real Prometheus server (Debian's ``/usr/bin/prometheus``) for the sandbox.

It runs with a temporary config (docs/architecture.md, "Working rules"), its
own ``--storage.tsdb.path`` and a 1 s scrape interval, listening on the sandbox's loopback block. It
scrapes the targets it is given (the sandbox's DCGM exporter) and serves the
query API the scaler's GPU view uses (``/api/v1/query``). Tests that check
Tidal's own monitoring also give it further scrape jobs (``jobs``: the
scaler's and the activator's ``/metrics``) and rule files, which it
evaluates at the same 1 s interval.

The process gets its own session and a parent-death signal, like every
process of the stack, and :meth:`PrometheusProcess.stop` ends it (SIGTERM,
then SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import aiohttp

from loadtests.sandbox.cluster.simple_launcher import die_with_parent

__all__ = ["PrometheusProcess"]


class PrometheusProcess:
    def __init__(
        self,
        binary: str,
        directory: Path,
        *,
        host: str,
        port: int = 9090,
        targets: Sequence[str] = (),
        jobs: Mapping[str, Sequence[str]] | None = None,
        rule_files: Sequence[Path] = (),
        scrape_interval_s: float = 1.0,
    ) -> None:
        """``targets``: the DCGM exporter(s), job ``dcgm``; ``jobs``: more jobs by name."""
        self.jobs = {name: list(addresses) for name, addresses in (jobs or {}).items()}
        if targets:
            if "dcgm" in self.jobs:
                raise ValueError(
                    "job name 'dcgm' is taken by 'targets'; give the other jobs other names"
                )
            self.jobs = {"dcgm": list(targets), **self.jobs}
        if not any(self.jobs.values()):
            raise ValueError("Prometheus needs at least one scrape target (host:port)")
        self.binary = binary
        self.directory = directory
        self.host = host
        self.port = port
        self.targets = list(targets)
        self.rule_files = [Path(f) for f in rule_files]
        self.scrape_interval_s = scrape_interval_s
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "prometheus.log"

    def _config(self) -> str:
        interval = f"{max(1, round(self.scrape_interval_s * 1000))}ms"
        config: dict[str, object] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": name,
                    "scrape_interval": interval,
                    "scrape_timeout": interval,
                    "static_configs": [{"targets": addresses}],
                }
                for name, addresses in self.jobs.items()
                if addresses
            ],
        }
        if self.rule_files:
            config["rule_files"] = [str(f.resolve()) for f in self.rule_files]
        return json.dumps(config, indent=2)  # JSON is YAML

    async def start(self, *, timeout_s: float = 30.0) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "prometheus.yml"
        config.write_text(self._config())
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                self.binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.directory / 'data'}",
                f"--web.listen-address={self.host}:{self.port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )
        await self._wait_ready(timeout_s)

    async def _wait_ready(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                if self.proc is None or self.proc.returncode is not None:
                    raise RuntimeError(f"prometheus exited during start; see {self.log}")
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.get(f"{self.url}/-/ready") as resp:
                        if resp.status == 200:
                            return
                if loop.time() > deadline:
                    raise TimeoutError(f"prometheus not ready within {timeout_s:.0f}s; {self.log}")
                await asyncio.sleep(0.2)

    async def stop(self, timeout_s: float = 10.0) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
