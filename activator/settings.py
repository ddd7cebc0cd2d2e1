"""The activator's settings: flags, then environment, then a YAML file, then defaults.

One pydantic-settings class with nested groups, loaded as the scaler's are
(:func:`groundwork.settings_loading.load_settings`). Environment variables
use the prefix ``TIDAL_ACTIVATOR_`` and ``__`` between a group and its key
(``TIDAL_ACTIVATOR_TIMEOUTS__CONNECT_S=2``). ``--config FILE`` names a YAML
file with the same shape as the class (``timeouts: {connect_s: 2}``).

Every field carries its unit in its name and its meaning in its description;
:func:`~groundwork.settings_loading.flag_specs` turns them into ``--flags``
whose help shows the default, so ``tidal activator --help`` documents every
setting. Timeouts are split by
phase, as KEDA's interceptor does; for each, 0 means "no limit" where that is
allowed and the description says so.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from activator.kube.notice_taints import DEFAULT_NOTICE_TAINTS, parse_notice_taints
from activator.scaler_link.peers import parse_scaler_urls
from groundwork.settings_loading import ServiceSettings
from groundwork.token_file import read_token

__all__ = ["ActivatorSettings"]


class Timeouts(BaseModel):
    """Timeouts by phase of a request."""

    model_config = {"extra": "forbid"}

    connect_s: float = Field(
        default=5.0, gt=0, description="seconds to open a connection to a replica"
    )
    upstream_idle_s: float = Field(
        default=900.0,
        ge=0,
        description=(
            "seconds a replica may stay silent (before its headers or between body chunks); "
            "long: a non-streamed generation sends nothing until it ends; 0: no limit"
        ),
    )
    client_idle_s: float = Field(
        default=75.0,
        gt=0,
        description="seconds an idle client connection (no request in progress) is kept",
    )
    client_body_idle_s: float = Field(
        default=60.0, gt=0, description="seconds a client may pause while sending a request body"
    )
    client_head_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "seconds from a request head's first byte to its end (408 beyond): a client that "
            "trickles its head cannot hold a connection"
        ),
    )
    drain_s: float = Field(
        default=120.0,
        ge=0,
        description="seconds SIGTERM waits for in-flight and held requests to end",
    )
    drain_grace_s: float = Field(
        default=5.0,
        ge=0,
        description=(
            "seconds between failing /readyz and closing the listener on SIGTERM, serving "
            "meanwhile: long enough for Services and load balancers to drop the pod"
        ),
    )
    probe_s: float = Field(default=0.5, gt=0, description="seconds one readiness probe may take")
    scaler_s: float = Field(
        default=2.0, gt=0, description="seconds one call to the scaler may take"
    )


class Limits(BaseModel):
    """Limits that keep one client from exhausting the activator."""

    model_config = {"extra": "forbid"}

    max_header_bytes: int = Field(
        default=8190,
        ge=1024,
        le=1_048_576,
        description="bytes in the request line or one header line",
    )
    max_headers: int = Field(default=128, ge=8, le=10_000, description="header lines in a request")
    max_head_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        le=16 * 1_048_576,
        description=(
            "bytes in a whole request head (431 beyond), counted as they arrive; at least "
            "max_header_bytes"
        ),
    )
    max_model_body_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        description="bytes of a body read to route by its JSON 'model' field (413 beyond)",
    )
    max_body_bytes: int = Field(
        default=0, ge=0, description="bytes of any streamed request body (413 beyond); 0: no limit"
    )
    max_held_body_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=0,
        description=(
            "bytes of request bodies (read to route by 'model') kept while their requests are "
            "held, over all targets per worker; past it 503 with Retry-After; 0: no limit"
        ),
    )
    backlog: int = Field(
        default=4096, ge=128, description="listen backlog of the data port (connections)"
    )
    upstream_connections: int = Field(
        default=0, ge=0, description="connections to all replicas together per worker; 0: no limit"
    )

    @model_validator(mode="after")
    def _head_holds_a_line(self) -> Limits:
        if self.max_head_bytes < self.max_header_bytes:
            raise ValueError(
                f"limits.max_head_bytes ({self.max_head_bytes}) must be at least "
                f"limits.max_header_bytes ({self.max_header_bytes}): a head holds its lines"
            )
        return self


class Defaults(BaseModel):
    """Per-target values used when a routes-file entry leaves them out (the annotations'
    defaults, docs/annotations.md)."""

    model_config = {"extra": "forbid"}

    cold_start_timeout_s: float = Field(default=600.0, ge=1, le=3600, description="seconds")
    max_buffered: int = Field(
        default=1000, ge=0, le=100_000, description="requests held per target"
    )
    container_concurrency: int = Field(
        default=0, ge=0, le=10_000, description="in-flight requests per replica; 0: no limit"
    )


class ActivatorSettings(ServiceSettings):
    """Everything ``tidal activator`` can be told."""

    model_config = SettingsConfigDict(
        env_prefix="TIDAL_ACTIVATOR_",
        env_nested_delimiter="__",
        extra="forbid",
    )

    host: str = Field(default="0.0.0.0", description="address of the data port")
    port: int = Field(default=8080, ge=0, le=65535, description="data port (0: any free port)")
    admin_host: str = Field(default="0.0.0.0", description="address of the admin port")
    admin_port: int = Field(
        default=9091, ge=0, le=65535, description="admin port: /healthz, /readyz, /metrics"
    )
    scaler_url: str = Field(
        default="http://tidal-scaler.tidal-system:8090",
        description=(
            "base URL of the scaler, or a comma-separated list; each host is resolved to all "
            "its addresses every 10 s and every replica gets every report"
        ),
    )
    scaler_token: SecretStr | None = Field(
        default=None,
        description=(
            "bearer token for the scaler; unset: no header. Give it in the environment or in "
            "scaler_token_file: a flag is visible to every user in ps"
        ),
    )
    scaler_token_file: Path | None = Field(
        default=None,
        description="file holding the scaler's bearer token (a mounted Secret), read at start",
    )
    name: str = Field(default="", description="name in reports; default: $POD_NAME, else host:pid")
    allow_target_header: bool = Field(
        default=False, description="route by the X-Tidal-Target: namespace/name header"
    )
    workers: int = Field(
        default=1, ge=1, le=256, description="worker processes sharing the data port"
    )
    routes: Path | None = Field(
        default=None, description="YAML routes file; unset: discover targets from Kubernetes"
    )
    routes_poll_s: float = Field(
        default=1.0, gt=0, description="seconds between checks of the routes file"
    )
    probe_interval_s: float = Field(
        default=0.2, gt=0, description="seconds between probes of endpoints not yet ready"
    )
    adapter_refresh_s: float = Field(
        default=2.0,
        gt=0,
        description="seconds between reads of each replica's LoRA adapters (model list and "
        "metrics), after which adapters idle past their keep-alive are unloaded",
    )
    recheck_ready_s: float = Field(
        default=1.0,
        gt=0,
        description="seconds between probes of ready endpoints (routes file only: no watch)",
    )
    report_period_s: float = Field(
        default=1.0, gt=0, description="seconds between /v1/stats reports"
    )
    retry_after_s: int = Field(default=1, ge=0, description="Retry-After seconds sent with 503")
    label_selector: str = Field(
        default="autoscaling.tidal.dev/enabled=true",
        description="Deployments opted in (Kubernetes)",
    )
    namespace: str = Field(default="", description="namespace to watch (Kubernetes); empty: all")
    kubeconfig: Path | None = Field(
        default=None,
        description="kubeconfig path (Kubernetes); unset: $KUBECONFIG, in-cluster, ~/.kube/config",
    )
    notice_taints: str = Field(
        default=",".join(DEFAULT_NOTICE_TAINTS),
        description=(
            "comma-separated node taint keys that announce an interruption (Kubernetes): no "
            "new requests go to replicas on such a node, those in flight finish; default: "
            "every provider preset's; add the scaler's placement.notice_taints; empty: "
            "Nodes are not watched"
        ),
    )
    log_level: str = Field(default="INFO", description="DEBUG, INFO, WARNING or ERROR")
    timeouts: Timeouts = Field(default_factory=Timeouts)
    limits: Limits = Field(default_factory=Limits)
    defaults: Defaults = Field(default_factory=Defaults)

    @model_validator(mode="after")
    def _check(self) -> ActivatorSettings:
        if self.port != 0 and self.port == self.admin_port:
            raise ValueError(
                f"port and admin_port must differ (admin endpoints are never served on the "
                f"data port); both are {self.port}"
            )
        if self.log_level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError(
                f"log_level must be DEBUG, INFO, WARNING or ERROR, got {self.log_level!r}"
            )
        parse_scaler_urls(self.scaler_url)
        parse_notice_taints(self.notice_taints)
        if self.scaler_token_file is not None:
            if self.scaler_token is not None:
                raise ValueError(
                    "give the scaler token once: scaler_token (TIDAL_ACTIVATOR_SCALER_TOKEN) "
                    "or scaler_token_file, not both"
                )
            self.scaler_token = SecretStr(
                read_token(self.scaler_token_file, setting="scaler_token_file")
            )
        return self
