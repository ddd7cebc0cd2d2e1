"""The example model the sandbox starts with: an annotated fake-vLLM Deployment.

It is what a user would write for a real vLLM Deployment (the label, the
``autoscaling.tidal.dev/*`` and ``routing.tidal.dev/*`` annotations, a
Service, a readiness probe on ``/health``, one GPU), plus the
``sandbox.tidal.dev/*`` pod annotations that tell the emulated kubelet to run
a fake vLLM with a cold start instead of pulling an image. The demo shortens
the windows and the grace period so the whole story fits in minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ExampleModel"]


def _duration(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{int(seconds * 1000)}ms"


@dataclass(frozen=True, slots=True)
class ExampleModel:
    name: str = "llama"
    namespace: str = "default"
    model: str = "llama-3-8b"
    startup_delay_s: float = 10.0
    min_scale: int = 0
    max_scale: int = 4
    target_concurrency: int = 8
    window_s: float = 60.0
    scale_down_delay_s: float = 60.0
    grace_s: float = 300.0
    cold_start_timeout_s: float = 600.0
    # Model time runs this much faster than wall time (1: an 8B model on an H100).
    speedup: float = 1.0
    extra_annotations: dict[str, str] = field(default_factory=dict)
    # More arguments for the fake vLLM (``sandbox.tidal.dev/args``), e.g.
    # ``("--max-num-seqs", "8")`` for a server whose batch fills first.
    server_args: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"{self.namespace}/{self.name}"

    def deployment(self) -> dict[str, Any]:
        labels = {"app": self.name}
        server_args = list(self.server_args)
        if self.speedup != 1.0:
            server_args += ["--speedup", str(self.speedup)]
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {**labels, "autoscaling.tidal.dev/enabled": "true"},
                "annotations": {
                    "autoscaling.tidal.dev/min-scale": str(self.min_scale),
                    "autoscaling.tidal.dev/max-scale": str(self.max_scale),
                    "autoscaling.tidal.dev/target-concurrency": str(self.target_concurrency),
                    "autoscaling.tidal.dev/window": _duration(self.window_s),
                    "autoscaling.tidal.dev/scale-down-delay": _duration(self.scale_down_delay_s),
                    "autoscaling.tidal.dev/scale-to-zero-grace-period": _duration(self.grace_s),
                    "routing.tidal.dev/models": self.model,
                    "routing.tidal.dev/cold-start-timeout": _duration(self.cold_start_timeout_s),
                    **self.extra_annotations,
                },
            },
            "spec": {
                "replicas": self.min_scale,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {
                        "labels": labels,
                        "annotations": {
                            "sandbox.tidal.dev/engine": "vllm",
                            "sandbox.tidal.dev/model": self.model,
                            "sandbox.tidal.dev/startup-delay": _duration(self.startup_delay_s),
                            **(
                                {"sandbox.tidal.dev/args": " ".join(server_args)}
                                if server_args
                                else {}
                            ),
                        },
                    },
                    "spec": {
                        "terminationGracePeriodSeconds": 30,
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:latest",
                                "args": ["--served-model-name", self.model],
                                "ports": [{"name": "http", "containerPort": 8000}],
                                "readinessProbe": {
                                    "httpGet": {"path": "/health", "port": "http"},
                                    "periodSeconds": 1,
                                },
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            }
                        ],
                    },
                },
            },
        }

    def service(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "selector": {"app": self.name},
                "ports": [{"name": "http", "port": 8000, "targetPort": "http"}],
            },
        }
