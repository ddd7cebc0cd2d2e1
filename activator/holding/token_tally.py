"""What a period's arrivals asked of a target, in tokens, for the scaler's report.

Only a target with a TTFT objective counts (``on``: the scaler sizes it by
prompt tokens and by the prompts too long for the objective); any other
skips the body walk altogether. The counts are estimates from the parsed
body (:func:`~activator.balancing.prefix_key.estimated_tokens`): the
activator has no tokenizer, and the scaler learns its capacity from the
servers' own counters, so these only tell it what is on the way.
"""

from __future__ import annotations

from groundwork.rules.prompt_sizes import PROMPT_SIZE_BOUNDS

__all__ = ["TokenTally"]


class TokenTally:
    """Estimated prompt tokens, ``max_tokens`` and prompt sizes since the last take."""

    __slots__ = ("on", "output", "over", "prompt")

    def __init__(self) -> None:
        self.on = False
        self.prompt = 0
        self.output = 0
        # Arrivals with an estimated prompt longer than each PROMPT_SIZE_BOUNDS.
        self.over = [0] * len(PROMPT_SIZE_BOUNDS)

    def add(self, prompt: int, output: int) -> None:
        """One arrival's estimated prompt tokens and ``max_tokens``
        (:func:`~activator.balancing.prefix_key.estimated_tokens` of its body)."""
        self.prompt += prompt
        self.output += output
        for i, bound in enumerate(PROMPT_SIZE_BOUNDS):
            if prompt <= bound:
                break
            self.over[i] += 1

    def take(self) -> tuple[int, int, list[int]]:
        """(estimated prompt tokens, max_tokens, arrivals over each of
        :data:`PROMPT_SIZE_BOUNDS`) since the last call; resets."""
        got = self.prompt, self.output, self.over
        self.prompt = self.output = 0
        self.over = [0] * len(PROMPT_SIZE_BOUNDS)
        return got
