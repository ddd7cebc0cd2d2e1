"""``GET /v1/targets`` shows what SLO-first scaling learned (scaler.app.target_view)."""

from __future__ import annotations

from scaler.app import target_view
from scaler.policy.api import Decision, Mode, Reason, SloReport
from scaler.targets.state import TargetState


def state(decision: Decision) -> TargetState:
    return TargetState(
        key="ns/llama",
        problem=None,
        spec_replicas=2,
        ready_replicas=2,
        decision=decision,
        readings={},
        combined=None,
        decided_at=10.0,
    )


def test_learned_capacity_is_shown_only_with_an_slo() -> None:
    report = SloReport(
        slo_ttft_s=2.0,
        attainment=0.99,
        capacity_tokens_per_s=24_512.34,
        capacity_learned=True,
        sized_replicas=2,
        late_share=0.001,
        requests_per_s=2.5,
    )
    with_slo = target_view(state(Decision(2, Reason.STEADY, Mode.STABLE, slo=report)))
    assert with_slo["slo"]["capacity_prompt_tokens_per_s"] == 24_512.3
    assert with_slo["slo"]["capacity_learned"] is True
    without = target_view(state(Decision(2, Reason.STEADY, Mode.STABLE)))
    assert "slo" not in without
