"""A small in-process memo of whole fits, keyed by the request's full content and the options.

Fitting the same request again (a retry, a replayed turn, a gateway seeing the same body) then
costs a walk over the request and a copy of the answer instead of a fit. Keys hold the request's
own strings, so a hit compares content, never trusts a hash alone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["FitMemo", "freeze", "thaw"]


def freeze(value: Any) -> Hashable:
    """A hashable, order-preserving image of a JSON-like value (dict order is kept: it is output)."""
    if type(value) is str:  # the bulk of any request: kept as is (a str never equals a tagged tuple)
        return value
    if isinstance(value, dict):
        return ("{", tuple((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[", tuple(freeze(v) for v in value))
    if isinstance(value, tuple):
        return ("(", tuple(freeze(v) for v in value))
    if isinstance(value, float) and (value != value or value == 0.0):
        # NaN never equals itself, and -0.0 equals 0.0 but is written differently: by their repr
        return ("float", repr(value))
    return (type(value).__name__, value)


def thaw(frozen: Any) -> Any:
    """The JSON-like value a :func:`freeze` image was made from, as new dicts and lists."""
    if type(frozen) is str:
        return frozen
    tag = frozen[0]
    if tag == "{":
        return {k: thaw(v) for k, v in frozen[1]}
    if tag == "[":
        return [thaw(v) for v in frozen[1]]
    if tag == "(":
        return tuple(thaw(v) for v in frozen[1])
    if tag == "float" and isinstance(frozen[1], str):
        return float(frozen[1])
    return frozen[1]


class FitMemo:
    """LRU of recent fits, each request kept as its frozen image and thawed out on a hit.

    Freezing and thawing cost less than half of two deep copies (0.19 + 0.07 ms against
    2 x 0.30 ms for the 114k-token example's fitted request), and callers can never change
    what is kept.
    """

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
        return thaw(request), report

    def put(self, key: Hashable, request: Any, report: Any) -> None:
        with self._lock:
            self._entries[key] = (freeze(request), report)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
