"""An LRU bounded by what its entries weigh (tokens, characters), not only by their number.

A process that measures by content keeps what it measured; bounded by entries alone, a server
measuring distinct large texts grew towards gigabytes. One entry heavier than the bound is kept
alone (the next lookup of the same text is the common case).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["WeighedLRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class WeighedLRU(Generic[K, V]):
    """Entries kept while their weights (``weigh(key, value)``) sum to at most ``max_weight``
    (and, given ``max_entries``, while there are at most that many), the least recently used
    dropped first; safe to share between threads."""

    def __init__(self, max_weight: int, weigh: Callable[[K, V], int], max_entries: int | None = None) -> None:
        self.max_weight = max_weight
        self.max_entries = max_entries
        self._weigh = weigh
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` (a key kept already keeps its first value)."""
        weight = self._weigh(key, value)
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (value, weight)
            self._held += weight
            most = self.max_entries
            while (self._held > self.max_weight and len(self._entries) > 1) or (
                most is not None and len(self._entries) > most
            ):
                self._held -= self._entries.popitem(last=False)[1][1]

    def missing(self, keys: Iterable[K]) -> list[K]:
        """The keys of ``keys`` not kept, in order (one lock for all; none is marked used)."""
        with self._lock:
            entries = self._entries
            return [k for k in keys if k not in entries]

    def pop(self, key: K) -> V | None:
        """The value of ``key``, no longer kept (None: none was)."""
        with self._lock:
            found = self._entries.pop(key, None)
            if found is None:
                return None
            self._held -= found[1]
            return found[0]

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0
