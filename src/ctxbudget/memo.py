"""A small in-process memo of whole fits, keyed by the request's full content and the options.

Fitting the same request again (a retry, a replayed turn, a gateway seeing the same body) then
costs a walk over the request and a copy of the answer instead of a fit. Keys hold the request's
own strings, so a hit compares content, never trusts a hash alone.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["FitMemo", "freeze"]


def freeze(value: Any) -> Hashable:
    """A hashable, order-preserving image of a JSON-like value (dict order is kept: it is output)."""
    if type(value) is str:  # the bulk of any request: kept as is (a str never equals a tagged tuple)
        return value
    if isinstance(value, dict):
        return ("{", tuple((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("[", tuple(freeze(v) for v in value))
    if isinstance(value, float) and value != value:  # NaN never equals itself: use its repr
        return ("nan",)
    return (type(value).__name__, value)


class FitMemo:
    """LRU of recent fits; values are deep-copied out so callers cannot change what is kept."""

    def __init__(self, max_entries: int = 32) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[Any, Any] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
        request, report = found
        return copy.deepcopy(request), report

    def put(self, key: Hashable, request: Any, report: Any) -> None:
        with self._lock:
            self._entries[key] = (copy.deepcopy(request), report)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
