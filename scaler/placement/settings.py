"""The scaler's ``placement`` settings group: provider, notice taints, release hold, prices.

``ScalerSettings.placement`` (environment ``TIDAL_SCALER_PLACEMENT__<NAME>``,
YAML ``placement: {...}``). It turns into the pure values the policy uses:
:meth:`PlacementSettings.preset` (a
:class:`~scaler.policy.placement.providers.ProviderPreset`) and
:meth:`PlacementSettings.price_table` (a
:class:`~scaler.policy.placement.cost.PriceTable`). Example YAML::

    placement:
      provider: gke
      notice_taints: [example.com/draining]
      release_hold_s: 120
      prices:                       # $ per GPU-hour; '*' is any other model
        on-demand: {"*": 3.67, NVIDIA-L4: 0.71}
        spot: {"*": 1.10, NVIDIA-L4: 0.28}

``provider: custom`` needs ``capacity_label`` and ``spot_value`` (and
``on_demand_value`` where on-demand nodes carry the label too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from scaler.policy.placement.availability import CapacityType
from scaler.policy.placement.cost import ANY_MODEL, DEFAULT_PRICES, PriceTable
from scaler.policy.placement.fallback import DEFAULT_RELEASE_HOLD_S
from scaler.policy.placement.providers import ProviderPreset, Toleration, custom_preset, preset

__all__ = ["PlacementSettings", "TolerationSetting"]


class TolerationSetting(BaseModel):
    key: str = Field(..., min_length=1, description="taint key the spot pods tolerate")
    value: str | None = Field(None, description="taint value (unset: any value, Exists)")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class PlacementSettings(BaseModel):
    provider: Literal["karpenter", "gke", "aks", "eks", "custom"] = Field(
        "karpenter", description="node labels/taints preset: karpenter, gke, aks, eks or custom"
    )
    capacity_label: str | None = Field(
        None, description="custom provider: node label key telling spot from on-demand"
    )
    spot_value: str | None = Field(None, description="custom provider: that label's spot value")
    on_demand_value: str | None = Field(
        None, description="custom provider: its on-demand value (unset: label absent)"
    )
    spot_tolerations: list[TolerationSetting] = Field(
        default_factory=list, description="custom provider: tolerations spot pods need"
    )
    notice_taints: list[str] = Field(
        default_factory=list,
        description="extra node taint keys that announce an interruption (added to the preset's)",
    )
    release_hold_s: float = Field(
        DEFAULT_RELEASE_HOLD_S,
        ge=0,
        description="on-demand that covered spot is released after spot is Ready this long, s",
    )
    prices: dict[str, dict[str, float]] | None = Field(
        None,
        description=(
            "$ per GPU-hour by capacity type (on-demand, spot) and GPU model ('*': any); "
            "unset: list-price defaults (docs/placement.md)"
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> PlacementSettings:
        if self.provider == "custom":
            if not self.capacity_label or not self.spot_value:
                raise ValueError(
                    "placement: provider custom needs capacity_label and spot_value "
                    f"(got capacity_label={self.capacity_label!r}, spot_value={self.spot_value!r})"
                )
        elif self.capacity_label or self.spot_value or self.on_demand_value:
            raise ValueError(
                f"placement: capacity_label, spot_value and on_demand_value are for provider "
                f"custom only; provider is {self.provider}"
            )
        self.preset()  # the preset's own checks, with their messages
        self.price_table()
        return self

    def preset(self) -> ProviderPreset:
        if self.provider != "custom":
            return preset(self.provider, extra_notice_taints=self.notice_taints)
        return custom_preset(
            capacity_label=self.capacity_label or "",
            spot_value=self.spot_value or "",
            on_demand_value=self.on_demand_value,
            spot_tolerations=[Toleration(t.key, t.value, t.effect) for t in self.spot_tolerations],
            notice_taints=self.notice_taints,
        )

    def price_table(self, *, flat: Mapping[str, float] | None = None) -> PriceTable:
        """The prices per GPU-hour: ``prices`` when set; else the scaler's flat
        ``prices.*_per_gpu_hour`` (``flat``, by capacity type; 0 is unset) for any
        model; else the defaults."""
        if self.prices is None:
            given = {c: p for c, p in (flat or {}).items() if p > 0}
            if not given:
                return DEFAULT_PRICES
            return PriceTable(
                per_gpu_hour={
                    capacity: (
                        {ANY_MODEL: given[capacity.value]}
                        if capacity.value in given
                        else dict(DEFAULT_PRICES.per_gpu_hour[capacity])
                    )
                    for capacity in CapacityType
                }
            )
        allowed = [c.value for c in CapacityType]
        unknown = sorted(set(self.prices) - set(allowed))
        if unknown:
            raise ValueError(
                f"placement.prices: unknown capacity type(s) {unknown}; allowed: {allowed}"
            )
        return PriceTable(
            per_gpu_hour={
                CapacityType(capacity): dict(models) for capacity, models in self.prices.items()
            }
        )
