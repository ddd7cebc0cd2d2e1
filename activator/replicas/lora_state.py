"""What a vLLM replica says about its LoRA adapters: pure parsers of its answers.

Loaded adapters are learned from the server, never assumed from what the
activator asked for (a replica restarts, another activator loads or
unloads, an operator calls the endpoint by hand):

- :func:`loaded_adapters`: ``GET /v1/models`` lists each loaded adapter as
  a card whose ``parent`` is the base model (base models have none);
- :func:`lora_info`: ``vllm:lora_requests_info`` is a gauge whose value is
  a timestamp and whose labels carry ``max_lora`` (adapters in one batch)
  and the comma-separated adapters with requests ``running_lora_adapters``
  and ``waiting_lora_adapters``; where several samples are exposed, the
  newest (largest value) is the state, as the Gateway API inference
  extension reads it.

Main decision: an answer that cannot be read is a ``ValueError`` naming
what was wrong, so the caller keeps its last known state for that replica
rather than forgetting what is loaded there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LORA_INFO_METRIC", "LoraInfo", "loaded_adapters", "lora_info"]

LORA_INFO_METRIC = "vllm:lora_requests_info"
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class LoraInfo:
    max_lora: int
    running: frozenset[str]
    waiting: frozenset[str]


def loaded_adapters(models: object) -> frozenset[str]:
    """The adapter ids in a ``GET /v1/models`` body (cards with a ``parent``)."""
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        raise ValueError("a model list is a JSON object with a 'data' list")
    return frozenset(
        card["id"]
        for card in data
        if isinstance(card, dict) and isinstance(card.get("id"), str) and card.get("parent")
    )


def _names(text: str) -> frozenset[str]:
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def lora_info(metrics: str) -> LoraInfo | None:
    """The newest ``vllm:lora_requests_info`` sample; None when the server has no LoRA."""
    best: tuple[float, dict[str, str]] | None = None
    for line in metrics.splitlines():
        if not line.startswith(LORA_INFO_METRIC + "{"):
            continue
        labels_text, _, rest = line[len(LORA_INFO_METRIC) + 1 :].rpartition("}")
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            raise ValueError(f"{LORA_INFO_METRIC}: no value in {line!r}") from None
        labels = dict(_LABEL.findall(labels_text))
        if best is None or value > best[0]:
            best = (value, labels)
    if best is None:
        return None
    labels = best[1]
    try:
        max_lora = int(labels.get("max_lora", ""))
    except ValueError:
        raise ValueError(
            f"{LORA_INFO_METRIC}: max_lora must be a whole number; got {labels.get('max_lora')!r}"
        ) from None
    return LoraInfo(
        max_lora=max_lora,
        running=_names(labels.get("running_lora_adapters", "")),
        waiting=_names(labels.get("waiting_lora_adapters", "")),
    )
