"""The contract between the emulated kubelet and the fake model servers.

The kubelet (``loadtests.sandbox.cluster``) starts one fake model server per
pod through a :class:`Launcher`; the servers package implements it. Keeping the
contract here lets the two sides be built and tested apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

Engine = Literal["vllm", "triton"]


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """What one fake model server process should be."""

    engine: Engine
    model: str
    host: str
    port: int
    startup_delay_s: float = 0.0
    # Extra command-line flags of ``tidal sandbox model-server`` (performance
    # knobs, faults), passed through as given, e.g. ("--max-num-seqs", "64").
    extra_args: tuple[str, ...] = ()
    # Environment additions for the process (on top of the launcher's).
    env: dict[str, str] = field(default_factory=dict)
    # Where the process writes stdout and stderr (appended); None: the launcher's stderr.
    log_path: str | None = None


class ServerProcess(Protocol):
    """A running fake model server; it runs in its own process group."""

    @property
    def pid(self) -> int: ...

    async def wait(self) -> int:
        """Wait for the process to exit; its exit status (negative: killed by a signal)."""
        ...

    def terminate(self) -> None:
        """SIGTERM: close the listener, finish running requests, exit."""
        ...

    def kill(self) -> None:
        """SIGKILL the process group."""
        ...


class Launcher(Protocol):
    """Starts fake model server processes quickly (well under a second each)."""

    async def start(self, spec: ServerSpec) -> ServerProcess: ...

    async def close(self) -> None:
        """Kill every process this launcher started, and any helper it keeps."""
        ...
