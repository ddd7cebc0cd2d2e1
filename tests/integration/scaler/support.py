"""What the scaler's integration tests share: waiting, bounded, for a condition."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

import pytest


async def eventually(check: Callable[[], object], what: str, *, timeout_s: float = 10.0) -> None:
    """Poll ``check`` (a function or a coroutine function) until it is true; fail after
    ``timeout_s`` naming ``what`` was awaited."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        done = check()
        if inspect.isawaitable(done):
            done = await done
        if done:
            return
        if loop.time() >= deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def user_deployment() -> dict[str, object]:
    """A user's one-GPU Deployment ``default/llama`` at zero, whose pods run no server
    (the API server gives it its uid)."""
    return {
        "metadata": {"name": "llama", "namespace": "default", "uid": "will-be-replaced"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "llama"}},
            "template": {
                "metadata": {
                    "labels": {"app": "llama"},
                    "annotations": {"sandbox.tidal.dev/process": "none"},
                },
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.6.3",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            },
        },
    }
