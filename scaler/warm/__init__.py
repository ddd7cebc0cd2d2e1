"""The warm tier: replicas that sleep when idle and wake in about a second.

``tier.py`` makes the sleep and wake calls and keeps which replicas sleep;
``gpu_memory.py`` reads GPU memory from Prometheus so a wake can make room
first. The pure parts (the sleep ladder, choosing what to wake, making room)
are :mod:`scaler.policy.warm`, under the policy's purity contract.
"""
