"""The watch streams the API server serves now: counted, and all cut at once by a fault.

A stream is added when its watch starts and leaves when it ends, however it
ends (:func:`~loadtests.sandbox.cluster.apiserver.watch.serve_watch`);
:meth:`OpenWatches.cut` ends them all, as a real API server's restart does
(a fault, and the server's stop).
"""

from __future__ import annotations

from loadtests.sandbox.cluster.watch_history import Watcher

__all__ = ["OpenWatches"]


class OpenWatches:
    """The server's open watch streams."""

    def __init__(self) -> None:
        self._watchers: set[Watcher] = set()

    def __len__(self) -> int:
        return len(self._watchers)

    def add(self, watcher: Watcher) -> None:
        self._watchers.add(watcher)

    def discard(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def cut(self) -> int:
        """End every stream; how many there were."""
        victims = list(self._watchers)
        for watcher in victims:
            watcher.close()
        return len(victims)
