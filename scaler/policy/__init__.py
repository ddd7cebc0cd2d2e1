"""Pure decision logic: no asyncio, aiohttp or Kubernetes imports, time passed in.

An import contract (``make lint``) keeps this package free of I/O so that every
decision can be tested by stepping a simulated clock; of the rest of Tidal it
imports only the rules both services agree on (:mod:`groundwork.rules`: the
annotations' grammar, durations, prompt size bounds), which are as pure.

What the controller uses, all re-exported here:

- :mod:`~scaler.policy.api`: the value types (config, observation, decision);
- :mod:`~scaler.policy.annotations`: ``parse_scaling_config`` (annotations to
  config, raising ``InvalidAnnotation`` naming every bad key);
- :mod:`~scaler.policy.windows`: ``SignalWindows``, one per target, fed with
  samples as they arrive and read at each decision;
- :mod:`~scaler.policy.decide`: ``decide`` and its ``PolicyState``;
- :mod:`~scaler.policy.placement.split`: ``split``, the spot/on-demand split.

Beside them, the pure pieces the controller, the hub and the actuator use:
:mod:`~scaler.policy.protocol` (the ``Policy`` seam and ``PurePolicy``),
:mod:`~scaler.policy.freshness` (when a signal may lower the scale),
:mod:`~scaler.policy.status_doc` (the status annotation's document),
:mod:`~scaler.policy.deletion` (pod-deletion-cost ranking),
:mod:`~scaler.policy.events` (Event reasons and messages) and
:mod:`~scaler.policy.warm_tier` (the warm tier: who sleeps, who wakes, what makes room),
and SLO-first scaling: :mod:`~scaler.policy.slo.decide` (the decision with ``slo-ttft``),
:mod:`~scaler.policy.slo.load` (load in tokens, learned capacity, sizing) and
:mod:`~scaler.policy.idle.keep_alive` (warm or zero on expected cost).
GPU shapes (:mod:`~scaler.policy.shapes`: the cluster's table, a
Deployment's shapes, a shape's pod template) are parsed and built here but
not yet used by the controller.
"""

from scaler.policy.annotations import (
    STATUS_ANNOTATION,
    AnnotationProblem,
    InvalidAnnotation,
    parse_scaling_config,
)
from scaler.policy.api import (
    Decision,
    Demand,
    Mode,
    Observation,
    PlacementConfig,
    Reason,
    ScalingConfig,
    SignalKind,
    SignalReading,
)
from scaler.policy.decide import PolicyState, decide, desired_for_signal
from scaler.policy.placement.split import Split, split
from scaler.policy.windows import MaxHold, SignalWindows, TrailingAverages

__all__ = [
    "STATUS_ANNOTATION",
    "AnnotationProblem",
    "Decision",
    "Demand",
    "InvalidAnnotation",
    "MaxHold",
    "Mode",
    "Observation",
    "PlacementConfig",
    "PolicyState",
    "Reason",
    "ScalingConfig",
    "SignalKind",
    "SignalReading",
    "SignalWindows",
    "Split",
    "TrailingAverages",
    "decide",
    "desired_for_signal",
    "parse_scaling_config",
    "split",
]
