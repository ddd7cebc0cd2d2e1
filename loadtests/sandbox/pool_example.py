"""The example model behind an InferencePool: its Deployment, Service and pool, as users write them.

What the InferencePool story (``tidal demo --story inferencepool``) and its
end-to-end test apply to the sandbox: the example model's fake-vLLM
Deployment with neither the opt-in label nor any of Tidal's annotations,
and an ``InferencePool`` that selects its pods, carries the opt-in label
and the scaling annotations (so the pool's annotations are what the scaler
reads), and names its endpoint picker (docs/gateway-api.md). In the sandbox
the picker is ``tidal sandbox epp`` (:class:`~loadtests.sandbox.epp.service.FakeEpp`),
reached on a loopback address rather than through its Service, so the pool
says where its metrics are (``autoscaling.tidal.dev/epp-metrics-url``) and
what its ``noEndpointRequestTTL`` is.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from loadtests.sandbox.epp.service import EppConfig
from loadtests.sandbox.epp.waiting_room import FlowControlLimits
from loadtests.sandbox.example import ExampleModel
from scaler.policy.pool_annotations import AWAKE_LABEL

__all__ = ["PoolExample"]

_A = "autoscaling.tidal.dev/"


@dataclass(frozen=True, slots=True)
class PoolExample:
    """The example model, scaled through an InferencePool named ``pool``."""

    model: ExampleModel
    pool: str = "llama-pool"
    no_endpoint_request_ttl_s: float = 300.0

    def deployment(self, *, replicas: int = 0, sleep_mode: bool = False) -> dict[str, Any]:
        """The model's Deployment, with nothing of Tidal's on it: the pool opts it in.

        ``sleep_mode``: its fake vLLM has vLLM's sleep mode (for the warm tier), and
        its pods start with the awake label the pool then selects on."""
        d = copy.deepcopy(self.model.deployment())
        meta = d["metadata"]
        meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.startswith(_A)}
        meta["annotations"] = {}
        d["spec"]["replicas"] = replicas
        if sleep_mode:
            template = d["spec"]["template"]
            # A new dict: the selector shares the example's labels, and must not get it.
            template["metadata"]["labels"] = {**template["metadata"]["labels"], AWAKE_LABEL: "true"}
            template["metadata"]["annotations"]["sandbox.tidal.dev/args"] = "--enable-sleep-mode"
            template["spec"]["containers"][0]["env"] = [
                {"name": "VLLM_SERVER_DEV_MODE", "value": "1"}
            ]
        return d

    def service(self) -> dict[str, Any]:
        return self.model.service()

    def inference_pool(self, *, metrics_url: str, awake_only: bool = False) -> dict[str, Any]:
        """The pool: the opt-in label, the model's scaling annotations, and its picker's
        (``awake_only``: it selects only pods labelled awake, for the warm tier)."""
        annotations = {
            k: v for k, v in self.model.deployment()["metadata"]["annotations"].items()
            if k.startswith(_A)
        }  # fmt: skip
        annotations[_A + "epp-metrics-url"] = metrics_url
        annotations[_A + "epp-no-endpoint-request-ttl"] = f"{self.no_endpoint_request_ttl_s:g}s"
        return {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {
                "name": self.pool,
                "namespace": self.model.namespace,
                "labels": {_A + "enabled": "true"},
                "annotations": annotations,
            },
            "spec": {
                "selector": {
                    "matchLabels": {
                        "app": self.model.name,
                        **({AWAKE_LABEL: "true"} if awake_only else {}),
                    }
                },
                "targetPorts": [{"number": 8000}],
                "endpointPickerRef": {"name": f"{self.pool}-epp", "port": {"number": 9002}},
            },
        }

    def epp_config(self, *, host: str) -> EppConfig:
        """The fake picker for the pool, on ``host`` (any free ports)."""
        ttl = self.no_endpoint_request_ttl_s
        return EppConfig(
            pool=self.pool,
            namespace=self.model.namespace,
            host=host,
            port=0,
            metrics_port=0,
            limits=FlowControlLimits(no_endpoint_request_ttl_s=ttl),
        )
