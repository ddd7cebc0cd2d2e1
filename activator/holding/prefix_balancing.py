"""One target's prefix-aware balancing, as its Target chooses a replica with it.

The glue between the request path and the pure router: a target whose
``routing.tidal.dev/balancing`` is ``prefix`` gets one :class:`PrefixBalancer`,
which turns the request body the activator already read (to route by
``model``) into prompt blocks (:mod:`activator.balancing.prefix_key`) and picks a
ready replica with :class:`~activator.balancing.prefix_affinity.PrefixAffinity`, keyed
by the replica's address (the same in every activator, so all of them build
the same ring).

Main decisions:

- **Only the fast path follows prefixes.** A request the gate holds (no
  ready replica, or all at ``container-concurrency``) goes to the first
  replica that frees up, as before: waiting longer for one particular
  replica would cost more than the prefill its cache saves.
- **A body that was not read is not read for this.** The activator parses a
  body only to route by ``model``; a model reached by host or path prefix
  is balanced by load. Reading bodies for balancing alone would hold every
  such request's body in memory, which the hold limits do not count.
- A body that is not JSON, or has no prompt, or one shorter than a block,
  is balanced by load (nothing to reuse).
- **Its record of each replica's cache is its share of it.** Each of *N*
  activators sees about 1/N of a replica's requests, so what it sent there
  that the replica still holds is about 1/N of the replica's cache: the
  record is aged at that share (:meth:`PrefixBalancer.share`, from the
  scaler's count of activators), not at the whole cache, which would keep
  blocks the replica evicted long ago.
- **Each pick is counted by outcome** (:data:`OUTCOMES`), in plain integers
  the metrics collector reads at a scrape, so that an operator sees
  affinity working: follow-ups sent where their prefix is (``history``),
  conversations placed by the ring (``ring``), affinity given way to the
  load bound (``spilled``, ``least-loaded``), requests held because every
  replica is full (``held``) and prompts with nothing to reuse
  (``no-prompt``). A target balanced by load has no balancer, so counts
  nothing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from activator.balancing.least_loaded import pick
from activator.balancing.prefix_affinity import AffinityConfig, PrefixAffinity
from activator.balancing.prefix_key import PromptBlocks, prompt_blocks
from activator.replicas.readiness import EndpointTracker

__all__ = ["OUTCOMES", "PrefixBalancer"]

# The router's reasons, as an operator reads them: "full" holds the request,
# "no-blocks" (and a body without a prompt) balances it by load.
OUTCOMES = ("history", "ring", "spilled", "least-loaded", "held", "no-prompt")
_OUTCOME_OF = {"full": "held", "no-blocks": "no-prompt"}


def _address(tracker: EndpointTracker) -> str:
    return tracker.key


class PrefixBalancer:
    """Prompt blocks from a body, and the replica for them."""

    def __init__(self, config: AffinityConfig | None = None, *, activators: int = 1) -> None:
        self.router: PrefixAffinity[EndpointTracker] = PrefixAffinity(
            config or AffinityConfig(), _address
        )
        self.routes: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.share(activators)

    def share(self, activators: int) -> None:
        """``activators`` share each replica: record this one's share of its cache."""
        whole = self.router.config.capacity_blocks
        self.router.index.capacity = max(1, whole // max(1, activators))

    @staticmethod
    def prompt_of(document: object) -> PromptBlocks | None:
        """The blocks of a request body already parsed to route by ``model``
        (parsed once: the proxy hands over its document)."""
        if document is None:
            return None
        prompt = prompt_blocks(document)
        return prompt if prompt.blocks else None

    def pick(
        self,
        prompt: PromptBlocks | None,
        ready: Sequence[EndpointTracker],
        limit: int,
        rng: random.Random,
    ) -> EndpointTracker | None:
        routes = self.routes
        if prompt is not None:
            tracker, reason = self.router.choose(
                prompt.blocks, ready, limit, anchor=prompt.anchor, anchor_key=prompt.anchor_key
            )
            outcome = _OUTCOME_OF.get(reason, reason)
            routes[outcome] += 1
            if reason != "no-blocks":
                return tracker
        else:
            routes["no-prompt"] += 1
        return pick(ready, limit, rng)
