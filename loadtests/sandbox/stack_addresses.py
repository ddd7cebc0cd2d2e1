"""Where each part of a started sandbox stack listens, and where its files are.

The cluster holds a loopback block 127.X.0.0/16 of its own; the scaler
listens on 127.X.0.2, the activator on 127.X.0.3, Prometheus (when asked
for) on 127.X.0.4 and further scalers on 127.X.0.5 and up, and an endpoint
picker (an InferencePool's) on 127.X.0.250, so two stacks on one machine
never collide and no port needs to be discovered. Further activators share
127.X.0.3 on the next ports (data and admin port + 1, + 2, ...), as
activator replicas side by side that share nothing but the scaler.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["StackAddresses"]


@dataclass(frozen=True, slots=True)
class StackAddresses:
    """A started stack's addresses: its block's first three octets and its ports."""

    prefix: str  # "127.X.0"
    scaler_port: int
    activator_port: int
    activator_admin_port: int
    kubeconfig: Path
    directory: Path

    def host(self, last_octet: int) -> str:
        return f"{self.prefix}.{last_octet}"

    def scaler_host(self, index: int = 0) -> str:
        """Scaler ``index``'s address: 127.X.0.2 for the first, 127.X.0.5 and up after."""
        return self.host(2 if index == 0 else 4 + index)

    @property
    def picker_host(self) -> str:
        """Where an endpoint picker of the stack's (``tidal sandbox epp``) listens: 127.X.0.250."""
        return self.host(250)

    def scaler_url_of(self, index: int) -> str:
        return f"http://{self.scaler_host(index)}:{self.scaler_port}"

    @property
    def scaler_url(self) -> str:
        return self.scaler_url_of(0)

    def activator_url_of(self, index: int) -> str:
        """Activator ``index``'s data URL: the stack's own is 0, add_activator's 1 and up."""
        return f"http://{self.host(3)}:{self.activator_port + index}"

    def activator_admin_url_of(self, index: int) -> str:
        return f"http://{self.host(3)}:{self.activator_admin_port + index}"

    @property
    def activator_url(self) -> str:
        return self.activator_url_of(0)

    @property
    def activator_admin_url(self) -> str:
        return self.activator_admin_url_of(0)
