"""What a replica of each shape buys: its prior from the catalog, then what it measures (pure).

A model with shapes is sized once per shape (:mod:`scaler.policy.shapes.decide`),
each with the policy state SLO-first scaling keeps for a model
(:class:`~scaler.policy.slo.state.SloState`: the prompt-only capacity, the
step model of both phases, the batch), kept per shape in a
:class:`ShapeStates` and fed only that shape's replicas' counters. So each
shape learns its prefill rate, step costs and batch from its own servers,
by the same rules and with whatever the SLO policy learns per replica.

**The prior** of a shape is the policy's stated prior for one replica of
the user's pod template (an 8B model on one H100 prefills about 25,000
prompt tokens per second; the prior, 12,000, lies between that and a 70B on
two), scaled by the shape's ratios against the **base shape**, the one the
template already is (else the first listed): prefill by ``compute``, the
step and per-sequence costs by ``bandwidth``, the batch by ``memory``
(vLLM's ``max-num-seqs`` caps it above). The ratios are the shape table's,
which default to the GPU catalog's (``groundwork/gpu_catalog.py``:
spec-sheet dense BF16 TFLOPS, memory bandwidth and framebuffer against one
H100 80GB SXM, a MIG slice's share of its GPU; docs/shapes.md lists them
with their sources). A 3g.40gb slice of an H100 thus starts at 3/7 of an
H100's prefill and half its decode.

**Without an objective** (per-replica targets such as
``target-concurrency``) nothing is learned: a shape's targets are the
template's times its :func:`target_ratio`, the smaller of its compute and
bandwidth ratios (a replica is as fast as its slower phase).

Main decision: the ratios are taken against the base shape, not the
catalog's reference GPU, because the policy's priors describe a replica
of the user's template: a model whose template asks for two H100s has a
prior for two, and a shape of one H100 is half of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from scaler.policy.api import ScalingConfig
from scaler.policy.decide import PolicyState
from scaler.policy.shapes.declarations import Capacity as Ratios
from scaler.policy.slo.load import PRIOR_PREFILL_TOKENS_PER_S, Capacity
from scaler.policy.slo.phases import PRIOR_SLOTS, PhaseFit
from scaler.policy.slo.state import SloState

__all__ = [
    "MAX_SHAPE_REPLICAS",
    "ShapeStates",
    "prior_state",
    "relative",
    "shape_config",
    "target_ratio",
]

#: The most replicas one shape is sized to alone: the annotations' own
#: ceiling for ``max-scale``. A shape's sizing is not capped at the model's
#: ``max-scale``: a 1g.10gb slice may need twenty where an H100 needs three,
#: and the mix, not the sizing, keeps the model's replicas within it.
MAX_SHAPE_REPLICAS = 1000


def relative(shape: Ratios, base: Ratios) -> Ratios:
    """``shape``'s ratios against ``base``'s (both against the catalog's reference)."""
    return Ratios(
        compute=shape.compute / base.compute,
        bandwidth=shape.bandwidth / base.bandwidth,
        memory=shape.memory / base.memory,
    )


def target_ratio(ratios: Ratios) -> float:
    """What a replica of the shape does against one of the base shape, with no
    objective to learn it from: its slower phase."""
    return min(ratios.compute, ratios.bandwidth)


def shape_config(config: ScalingConfig, ratios: Ratios) -> ScalingConfig:
    """``config`` as it applies to one replica of a shape with ``ratios`` against the
    base: count targets scaled by :func:`target_ratio`, sized up to
    :data:`MAX_SHAPE_REPLICAS` (the mix keeps the model within ``max-scale``)."""
    ratio = target_ratio(ratios)
    depth = config.target_queue_depth
    return replace(
        config,
        target_concurrency=config.target_concurrency * ratio,
        target_queue_depth=None if depth is None else depth * ratio,
        max_scale=MAX_SHAPE_REPLICAS,
    )


def prior_state(ratios: Ratios, now: float) -> PolicyState:
    """A shape's first policy state: the SLO policy's priors scaled by ``ratios``
    (module docstring)."""
    slots = max(1.0, PRIOR_SLOTS * min(1.0, ratios.memory))
    slo = replace(
        SloState.start(now),
        capacity=Capacity(tokens_per_s=PRIOR_PREFILL_TOKENS_PER_S * ratios.compute),
        fit=PhaseFit.scaled(compute=ratios.compute, bandwidth=ratios.bandwidth, slots=slots),
    )
    return replace(PolicyState.initial(now), slo=slo)


@dataclass(frozen=True, slots=True)
class ShapeStates:
    """Each shape's policy state, by shape name (a keyed collection of what the policy
    keeps for one model, so whatever it learns per replica is learned per shape)."""

    states: Mapping[str, PolicyState]

    def __post_init__(self) -> None:
        object.__setattr__(self, "states", MappingProxyType(dict(self.states)))

    def get(self, name: str, ratios: Ratios, now: float) -> PolicyState:
        """The shape's state; its prior (:func:`prior_state`) the first time."""
        state = self.states.get(name)
        return state if state is not None else prior_state(ratios, now)

    def with_states(self, states: Mapping[str, PolicyState]) -> ShapeStates:
        """These states, replacing those of the same shapes; shapes not named stay."""
        return ShapeStates({**self.states, **states})

    def only(self, names: frozenset[str]) -> ShapeStates:
        """The states of ``names`` only (a shape no longer listed forgets what it learned)."""
        return ShapeStates({n: s for n, s in self.states.items() if n in names})
