"""The vLLM flags of a container that the fake vLLM honours as real vLLM would.

A real vLLM reads its memory and batch limits from its command line, and
they differ per GPU (``--max-model-len 16384`` where a 40 GB slice cannot
hold the full context; ``--gpu-memory-utilization 0.95`` on a small card).
The sandbox's kubelet hands these to the fake server from the container's
``command`` and ``args`` (:func:`tuning_flags`), so a manifest, or a
companion built for another GPU shape, behaves here as it would there:

- ``--max-model-len``, ``--max-num-seqs``, ``--max-num-batched-tokens``,
  ``--gpu-memory-utilization``, as ``--flag value`` or ``--flag=value``,
  and in vLLM's underscore spelling (``--max_model_len``) too.

Other flags (the model, the port, quantization, ...) are not the fake
server's to read and are left out. ``sandbox.tidal.dev/args`` comes after
these on the fake server's command line, so it wins where both set a flag.

Main decision: only flags that mean the same to the fake server as to vLLM
are taken; a flag the fake does not model would be refused by its parser
and crash every pod of a manifest that works on a real cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["TUNING_FLAGS", "tuning_flags"]

#: vLLM's flags the fake vLLM takes with the same meaning.
TUNING_FLAGS = (
    "--max-model-len",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--gpu-memory-utilization",
)


def tuning_flags(container: Mapping[str, Any]) -> tuple[str, ...]:
    """``(flag, value, ...)`` for each of :data:`TUNING_FLAGS` the container sets, last one wins."""
    words = [str(w) for w in (*(container.get("command") or ()), *(container.get("args") or ()))]
    found: dict[str, str] = {}
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if not flag.startswith("--"):
            continue
        flag = "--" + flag[2:].replace("_", "-")
        if flag not in TUNING_FLAGS:
            continue
        if not eq:
            if i + 1 >= len(words) or words[i + 1].startswith("--"):
                continue  # no value: real vLLM would refuse to start; not ours to guess
            value = words[i + 1]
        found[flag] = value
    return tuple(part for flag, value in found.items() for part in (flag, value))
