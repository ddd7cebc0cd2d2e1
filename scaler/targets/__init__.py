"""The opted-in targets (models) and what the scaler keeps of each.

``book.py`` syncs the targets and their parsed configs; ``reconciler.py``
holds one target's state across decisions and reconciles it;
``state.py`` is its read-only picture for ``/v1/targets``.
"""
