"""The opted-in targets (models) and what the scaler keeps of each.

``book.py`` syncs the targets and their parsed configs; ``state.py`` is a
target's state across decisions and its read-only picture for
``/v1/targets``; ``deciding.py`` makes one decision for one target.
"""
