"""The warm tier: replicas that sleep when idle and wake in about a second.

``tier.py`` makes the sleep and wake calls (``calls.py`` is their HTTP
seam) and hands each target's reconciler what a tick or an activation
needs; ``pool.py`` keeps the books (which replicas are not awake, their
addresses, counters, memory footprints); ``choices.py`` decides from the
books and the models' views (what to sleep, what to wake, what makes room);
``room.py`` makes room on a GPU for a wake (the models put to sleep
first, or after a wake failed for memory), through the tier's own sleep
call; ``views.py`` is what it reads of the models (a board each target's
reconciler publishes on after a decision) and where its Events go;
``gpu_memory.py`` reads GPU memory from Prometheus so a wake can make room
first. When to sleep, wake or fall back to a cold start is each target's
reconciler's (:mod:`scaler.targets.reconciler`); the tier holds nothing of
the controller. The pure parts (the sleep ladder, choosing what to wake,
making room) are :mod:`scaler.policy.warm_tier`, under the policy's purity
contract.
"""
