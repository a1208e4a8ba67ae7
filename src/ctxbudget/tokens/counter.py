"""Counting with a content cache: each distinct text is tokenized once per process.

:func:`analyze` encodes a text once and keeps, for each token, the byte offset where it ends.
From that one pass the fitter reads the cost of every part of a rendered request and of any
prefix of it (a sentence boundary, a token-level cut) without tokenizing again.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass
from itertools import accumulate

from .encoding import Encoding

__all__ = ["ChunkAnalysis", "TokenCounter", "analyze", "clear_count_cache"]


@dataclass(frozen=True, slots=True)
class ChunkAnalysis:
    """One text encoded once: its UTF-8 bytes and the byte offset where each token ends."""

    data: bytes
    byte_ends: list[int]

    @property
    def tokens(self) -> int:
        """Number of tokens of the whole text."""
        return len(self.byte_ends)

    def tokens_starting_before(self, byte_offset: int) -> int:
        """How many tokens start before ``byte_offset`` (a token belongs where it starts)."""
        if byte_offset <= 0 or not self.byte_ends:
            return 0
        return 1 + min(bisect_left(self.byte_ends, byte_offset), len(self.byte_ends) - 1)

    def tokens_between(self, start: int, end: int) -> int:
        """Tokens that start in the byte range ``[start, end)``."""
        return self.tokens_starting_before(end) - self.tokens_starting_before(start)

    def cut_after_tokens(self, start: int, count: int) -> int:
        """Byte offset just after the ``count``-th token starting at or after ``start``."""
        first = self.tokens_starting_before(start)
        last = min(first + count, len(self.byte_ends))
        return start if last <= first else self.byte_ends[last - 1]


class _AnalysisCache:
    """An LRU of analyses keyed by (encoding, text), bounded by the tokens it holds."""

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[str, str], ChunkAnalysis] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> ChunkAnalysis | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: tuple[str, str], value: ChunkAnalysis) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = value
            self._held += value.tokens + 1
            while self._held > self.max_tokens and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._held -= dropped.tokens + 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0


_CACHE = _AnalysisCache(max_tokens=8_000_000)


def clear_count_cache() -> None:
    """Forget every cached count (benchmarks use it to time a cold fit)."""
    _CACHE.clear()


def analyze(encoding: Encoding, text: str) -> ChunkAnalysis:
    """Encode ``text`` once (or fetch it from the content cache) with token byte offsets."""
    key = (encoding.name, text)
    found = _CACHE.get(key)
    if found is not None:
        return found
    lengths = encoding.byte_lengths()
    byte_ends = list(accumulate(map(lengths.__getitem__, encoding.encode(text))))
    result = ChunkAnalysis(text.encode("utf-8"), byte_ends)
    _CACHE.put(key, result)
    return result


@dataclass(frozen=True)
class TokenCounter:
    """Counts for one model: an encoding, whether it is exact, and the estimate's safety factor.

    For exact encodings ``safety_factor`` is 1. For models with no public tokenizer the proxy
    encoding's count is multiplied by ``safety_factor`` and rounded up, and ``exact`` is False.
    """

    encoding: Encoding
    exact: bool
    safety_factor: float = 1.0

    @property
    def encoding_name(self) -> str:
        """Name of the (exact or proxy) encoding."""
        return self.encoding.name

    def raw(self, text: str) -> int:
        """Tokens of ``text`` in the encoding itself (no safety factor)."""
        return analyze(self.encoding, text).tokens if text else 0

    def scale(self, raw_tokens: int) -> int:
        """Raw encoding tokens -> reported tokens (rounded up when estimating)."""
        if self.exact or self.safety_factor == 1.0:
            return raw_tokens
        return math.ceil(raw_tokens * self.safety_factor - 1e-9)

    def unscale(self, tokens: int) -> int:
        """Reported tokens -> the most raw tokens that stay within them."""
        if self.exact or self.safety_factor == 1.0:
            return tokens
        return max(0, math.floor(tokens / self.safety_factor + 1e-9))

    def count(self, text: str) -> int:
        """Reported tokens of ``text``: exact, or the labelled estimate."""
        return self.scale(self.raw(text))
