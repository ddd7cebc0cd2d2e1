"""``tidal scaler`` settings: flags, then environment, then a YAML file.

One pydantic-settings class with nested groups, loaded as the activator's
are (:func:`groundwork.settings_loading.load_settings`, whose errors name the
flag, variable or file key, the value and what is allowed). Environment variables are
``TIDAL_SCALER_<NAME>`` and ``TIDAL_SCALER_<GROUP>__<NAME>`` (for example
``TIDAL_SCALER_LEADER__LEASE_DURATION_S=20``); the file given by ``--config``
holds the same names as YAML (``leader: {lease_duration_s: 20}``). A flag
beats the environment, which beats the file, which beats the default. Units
are in the names; every field says its default and unit in ``--help``.

Main decisions:

- Cross-field checks live in one validator whose messages name the key, the
  value got and what is allowed (leader timings must nest: retry period <
  renew deadline < lease duration).
- **Secrets stay off the command line.** The bearer token comes from
  ``TIDAL_SCALER_TOKEN`` or a file (``--token-file``, a mounted Secret); the
  ``--token`` flag still works, but every user sees it in ``ps``, so the CLI
  warns about it (:func:`visible_secret_warnings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from groundwork.settings_loading import ServiceSettings, SettingsError, env_name, setting_fields
from groundwork.settings_loading import load_settings as load_service_settings
from groundwork.settings_loading import visible_secret_warnings as warn_visible_secrets
from groundwork.token_file import read_token
from scaler.placement.settings import PlacementSettings
from scaler.signals.activator_reports import ReportSettings
from scaler.signals.endpoint_picker import EppSettings
from scaler.signals.prometheus import GpuMetric, PrometheusSettings
from scaler.signals.scrape import ScrapeSettings

__all__ = [
    "ScalerSettings",
    "SettingsError",
    "describe_settings",
    "load_settings",
    "visible_secret_warnings",
]

ENV_PREFIX = "TIDAL_SCALER_"

# The flags ``tidal scaler`` has, by the setting each sets: the rest of the
# settings come from the environment or the file.
FLAGS = {
    "port": "--port",
    "host": "--host",
    "token": "--token",
    "token_file": "--token-file",
    "identity": "--identity",
    "tick_interval_s": "--tick-interval-s",
    "kube.kubeconfig": "--kubeconfig",
    "kube.context": "--context",
    "prometheus.url": "--prometheus-url",
    "log_level": "--log-level",
}


class KubeSettings(BaseModel):
    kubeconfig: str | None = Field(
        None, description="kubeconfig path (default: $KUBECONFIG, in-cluster, ~/.kube/config)"
    )
    context: str | None = Field(None, description="kubeconfig context (default: current)")
    request_timeout_s: float = Field(10.0, gt=0, description="timeout of one API call, seconds")
    watch_timeout_s: int = Field(
        300, ge=10, description="server-side timeout of one watch stream, seconds"
    )
    inference_pools: bool = Field(
        True,
        description="watch opted-in InferencePools and scale the Deployments they select "
        "(docs/gateway-api.md)",
    )


class LeaderSettings(BaseModel):
    lease_name: str = Field("tidal-scaler", description="name of the Lease")
    namespace: str | None = Field(
        None,
        description=(
            "namespace of the Lease (default: own namespace, kubeconfig context's, or default)"
        ),
    )
    lease_duration_s: float = Field(
        15.0, gt=0, description="how long a Lease lasts unrenewed, seconds"
    )
    renew_deadline_s: float = Field(
        10.0, gt=0, description="a leader that has not renewed for this long stops writing, seconds"
    )
    retry_period_s: float = Field(2.0, gt=0, description="time between election attempts, seconds")


class PriceSettings(BaseModel):
    on_demand_per_gpu_hour: float = Field(
        0.0, ge=0, description="price of one on-demand GPU-hour, for the cost metric (0: unset)"
    )
    spot_per_gpu_hour: float = Field(
        0.0, ge=0, description="price of one spot GPU-hour, for the cost metric (0: unset)"
    )


class ScalerSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    host: str = Field("0.0.0.0", description="address to listen on")
    port: int = Field(
        8090, ge=0, le=65535, description="port for /v1/* , /healthz, /readyz, /metrics"
    )
    token: SecretStr | None = Field(
        None,
        description=(
            "bearer token required by POST /v1/stats and /v1/activate (prefer the "
            "environment or token_file: a --token flag is visible to every user in ps)"
        ),
    )
    token_file: Path | None = Field(
        None,
        description="file holding the bearer token (a mounted Secret); read once at start",
    )
    identity: str | None = Field(
        None, description="this replica's name in the Lease (default: $POD_NAME, else host:pid)"
    )
    tick_interval_s: float = Field(2.0, gt=0, description="time between decisions, seconds")
    sleep_handoff_s: float = Field(
        2.0,
        ge=0,
        description=(
            "warm tier: how long a replica is announced as not routable before it is put to "
            "sleep (at least two activator report periods), seconds"
        ),
    )
    warm_moves: bool = Field(
        True,
        description=(
            "warm tier, with GPU metrics: empty a GPU that holds only sleepers by making each "
            "sleeper's pod template prefer a node whose GPU serves (a rollout; Deployments of "
            "one replica only)"
        ),
    )
    warm_move_settle_s: float = Field(
        60.0,
        gt=0,
        description=(
            "warm tier: how long a GPU holds only sleepers before moving them is considered "
            "(and the least such a move must save), seconds"
        ),
    )
    fresh_within_s: float = Field(
        5.0, gt=0, description="a signal sample older than this cannot lower the scale, seconds"
    )
    max_concurrent_writes: int = Field(16, ge=1, description="Kubernetes writes in flight at once")
    log_level: str = Field("info", description="debug, info, warning or error")
    kube: KubeSettings = Field(default_factory=KubeSettings)  # type: ignore[arg-type]
    leader: LeaderSettings = Field(default_factory=LeaderSettings)  # type: ignore[arg-type]
    reports: ReportSettings = Field(default_factory=ReportSettings)  # type: ignore[arg-type]
    # The polled demand sources: each field of a PolledSourceSettings type registers
    # one (scaler.signals.registry; docs/architecture.md, "The signal sources").
    scrape: ScrapeSettings = Field(default_factory=ScrapeSettings)  # type: ignore[arg-type]
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)  # type: ignore[arg-type]
    endpoint_picker: EppSettings = Field(default_factory=EppSettings)  # type: ignore[arg-type]
    prices: PriceSettings = Field(default_factory=PriceSettings)  # type: ignore[arg-type]
    placement: PlacementSettings = Field(default_factory=PlacementSettings)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _check(self) -> ScalerSettings:
        le = self.leader
        if not le.retry_period_s < le.renew_deadline_s < le.lease_duration_s:
            raise ValueError(
                "leader: need retry_period_s < renew_deadline_s < lease_duration_s, got "
                f"{le.retry_period_s} < {le.renew_deadline_s} < {le.lease_duration_s}"
            )
        if self.reports.fresh_within_periods > self.reports.drop_after_periods:
            raise ValueError(
                "reports: fresh_within_periods must be <= drop_after_periods, got "
                f"{self.reports.fresh_within_periods} > {self.reports.drop_after_periods}"
            )
        if self.token_file is not None:
            if self.token is not None:
                raise ValueError(
                    "token and token_file: set one of them, not both (token_file is "
                    f"{str(self.token_file)!r})"
                )
            self.token = SecretStr(read_token(self.token_file, setting="token_file"))
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            raise ValueError(
                f"log_level: allowed debug, info, warning, error; got {self.log_level!r}"
            )
        return self


def load_settings(
    *, flags: Mapping[str, Any] | None = None, config_file: str | Path | None = None
) -> ScalerSettings:
    """Settings from ``flags`` (dotted names for groups; ``None`` values are unset),
    the environment and ``config_file``; :class:`SettingsError` when they are bad."""
    return load_service_settings(
        ScalerSettings, flags=flags, config_file=config_file, flag_names=FLAGS
    )


def describe_settings() -> str:
    """Every setting without a flag, with its environment variable, default and meaning
    (for ``--help``, under the flags, which say the same of theirs: each said once)."""
    lines = [
        "settings without a flag (flag > environment > --config YAML > default;",
        "the flags above are settings too, their environment variables named beside them):",
    ]
    for dotted, info in setting_fields(ScalerSettings):
        if dotted in FLAGS:
            continue
        env = env_name(ScalerSettings, dotted)
        default = info.get_default(call_default_factory=True)
        if isinstance(default, GpuMetric):
            default = default.value
        lines.append(f"  {dotted:34} {env}  (default: {default})")
        if info.description:
            lines.append(f"      {info.description}")
    return "\n".join(lines)


def visible_secret_warnings(flags: Mapping[str, Any]) -> list[str]:
    """Warnings for secrets given as command-line flags (dotted names, as to
    :func:`load_settings`): every user of the machine can read them in ``ps``."""
    return warn_visible_secrets(ScalerSettings, flags, flag_names=FLAGS)
