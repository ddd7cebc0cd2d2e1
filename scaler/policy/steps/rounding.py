"""Fractional replica counts rounded up, past float noise.

Window averages carry float noise: 16.0000000001 requests at a target of
16 must want one replica, not two. Step 1 (what a signal asks for) and
step 2 (the rate limits) both round up through this one rule.
"""

from __future__ import annotations

import math

__all__ = ["EPSILON", "ceil_replicas"]

# Absorbs float noise in window averages (16.0000000001 / 16 must want 1, not 2).
EPSILON = 1e-9


def ceil_replicas(x: float) -> int:
    """``ceil(x)`` of a replica count, never below 0, with :data:`EPSILON` of slack."""
    return max(0, math.ceil(x - EPSILON))
