"""The opted-in targets (models) and what the scaler keeps of each.

``book.py`` follows the targets and parses their configs once per change;
``reconciler.py`` holds one target's state across decisions and runs its
steps in order; ``deciding.py`` is one decision (observe, count, policy,
placement split); ``publishing.py`` what a decision shows (gauges, the
model's view for the warm tier); ``waking.py`` the target's warm-tier
intents (wakes in the background, the fallback to a cold start);
``state.py`` the read-only picture for ``/v1/targets``.
"""
