"""Counting with a content cache: each distinct text is tokenized once per process.

:func:`analyze` encodes a text once and keeps, for each token, the byte offset where it ends.
From that one pass the fitter reads the cost of every part of a rendered request and of any
prefix of it (a sentence boundary, a token-level cut) without tokenizing again.
"""

from __future__ import annotations

import math
import threading
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate
from zlib import adler32

from ..weighed import WeighedLRU
from .encoding import Encoding, TiktokenEncoding
from .registry import when_replaced

__all__ = [
    "AHEAD_MIN_CHARS",
    "ChunkAnalysis",
    "CountingAhead",
    "TokenCounter",
    "analyze",
    "cached_analysis",
    "clear_count_cache",
    "count_ahead",
    "count_together",
]


BLOCK = 64  # tokens a block; at most 255 bytes a token keeps a block's byte sum below 65,521


class ChunkAnalysis:
    """One text encoded once: the text, its size in UTF-8 bytes and each token's length in bytes.

    Token lengths are kept as ``bytes`` (one byte a token; no token of a supported encoding is
    longer than 255 bytes) rather than the encoder's list of ids: a ``bytes`` object is not
    tracked by Python's cycle collector, which otherwise re-traverses every cached token on
    each collection (measured: 6-9 ms of a 60 ms cold fit of 114k tokens). Token end offsets
    are lazily kept as per-block running sums (64 tokens a block) plus, for blocks that are
    looked up, each token's absolute end, so a lookup scans at most one block.
    """

    __slots__ = ("_block_ends", "_blocks", "lengths", "size", "text")

    def __init__(self, text: str, lengths: bytes) -> None:
        self.text = text  # the cache's key holds it already: no copy of its bytes is kept
        self.lengths = lengths
        self.size = len(text) if text.isascii() else len(text.encode("utf-8"))
        self._block_ends: list[int] | None = None
        self._blocks: dict[int, array[int]] = {}

    def chars_between(self, start: int, end: int) -> int:
        """Characters of the text in the byte range ``[start, end)`` (a character cut by either
        end is not counted)."""
        if self.size == len(self.text):  # ASCII: a byte a character
            return max(0, min(end, self.size) - max(start, 0))
        return len(self.text.encode("utf-8")[start:end].decode("utf-8", "ignore"))

    @property
    def tokens(self) -> int:
        """Number of tokens of the whole text."""
        return len(self.lengths)

    def _ends(self) -> list[int]:
        ends = self._block_ends
        if ends is None:
            lengths = self.lengths
            # A block's byte sum is the low half of its Adler-32 minus 1: that half is 1 + the byte
            # sum mod 65,521, and 64 bytes of at most 255 sum to at most 16,320. zlib does in C what
            # ``sum`` does a byte at a time (0.83 ms against 1.78 ms for 114,050 tokens).
            ends = list(
                accumulate(
                    (adler32(lengths[i : i + BLOCK]) & 0xFFFF) - 1 for i in range(0, len(lengths), BLOCK)
                )
            )
            self._block_ends = ends
        return ends

    def _block(self, block: int) -> array[int]:
        """Absolute byte ends of the tokens of one block (built on first use, then kept).

        Kept as an array of 4-byte integers: as a list of Python ints it was about 36 bytes a
        token, and splitting a million-token text into passages looks up every block (36 MB)."""
        found = self._blocks.get(block)
        if found is None:
            base = self._ends()[block - 1] if block else 0
            found = array("I", accumulate(self.lengths[block * BLOCK : (block + 1) * BLOCK], initial=base))[
                1:
            ]
            self._blocks[block] = found
        return found

    def _byte_end(self, k: int) -> int:
        return self._block(k // BLOCK)[k % BLOCK]

    def _ending_before(self, byte_offset: int) -> int:
        ends = self._ends()
        block = bisect_left(ends, byte_offset)
        if block >= len(ends):
            return len(self.lengths)
        return block * BLOCK + bisect_left(self._block(block), byte_offset)

    def tokens_starting_before(self, byte_offset: int) -> int:
        """How many tokens start before ``byte_offset`` (a token belongs where it starts)."""
        if byte_offset <= 0 or not self.lengths:
            return 0
        return 1 + min(self._ending_before(byte_offset), len(self.lengths) - 1)

    def tokens_between(self, start: int, end: int) -> int:
        """Tokens that start in the byte range ``[start, end)``."""
        if start <= 0 and end >= self.size:
            return self.tokens
        return self.tokens_starting_before(end) - self.tokens_starting_before(start)

    def cut_after_tokens(self, start: int, count: int) -> int:
        """Byte offset just after the ``count``-th token starting at or after ``start``."""
        first = self.tokens_starting_before(start)
        last = min(first + count, len(self.lengths))
        return start if last <= first else self._byte_end(last - 1)


# About 9 bytes a cached token (its length byte, the text as key and as UTF-8), plus ~36 for
# each token of a block that was looked up: 2M tokens is 18-90 MB.
_CACHE: WeighedLRU[tuple[str, str], ChunkAnalysis] = WeighedLRU(
    2_000_000, lambda _, analysis: analysis.tokens + 1
)


def clear_count_cache() -> None:
    """Forget every cached count (benchmarks use it to time a cold fit)."""
    _CACHE.clear()


when_replaced(clear_count_cache)


def cached_analysis(encoding: Encoding, text: str) -> ChunkAnalysis | None:
    """The analysis of ``text`` if it is in the content cache (never encodes)."""
    return _CACHE.get((encoding.name, text))


def analyze(encoding: Encoding, text: str) -> ChunkAnalysis:
    """Encode ``text`` once (or fetch it from the content cache) with token byte offsets."""
    key = (encoding.name, text)
    found = _CACHE.get(key)
    if found is not None:
        return found
    result = ChunkAnalysis(text, encoding.token_lengths(text))
    _CACHE.put(key, result)
    return result


# Below this many characters counted ahead, the hand-off to a worker costs more than it saves.
AHEAD_MIN_CHARS = 64_000


class CountingAhead:
    """Texts being counted on a thread of their own (:func:`count_ahead`)."""

    __slots__ = ("_failed", "_thread")

    def __init__(self, encoding: TiktokenEncoding | None = None, texts: list[str] | None = None) -> None:
        self._failed: BaseException | None = None
        self._thread: threading.Thread | None = None
        if encoding is not None and texts:
            # A thread of its own, not a pool's: ``start`` hands it the GIL at once, and it keeps
            # it until the engine's call releases it. A pool's worker, woken while the caller's
            # regexes hold the GIL, got it only at the next switch (5 ms): after the checks.
            self._thread = threading.Thread(
                target=self._count, args=(encoding, texts), name="ctxbudget-ahead"
            )
            self._thread.start()

    def _count(self, encoding: TiktokenEncoding, texts: list[str]) -> None:
        try:
            _cache_each(encoding, texts)
        except BaseException as exc:  # raised in the caller's thread by wait()
            self._failed = exc

    def wait(self) -> None:
        """Return once the texts are in the content cache (those the engine leaves to tiktoken
        are counted when needed, as without this)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._failed is not None:
            raise self._failed


def _cache_each(encoding: TiktokenEncoding, texts: list[str]) -> None:
    for text, lengths in zip(texts, encoding.token_lengths_each(texts) or (), strict=False):
        if lengths is not None:
            _CACHE.put((encoding.name, text), ChunkAnalysis(text, lengths))


def _uncached(encoding: Encoding, texts: Iterable[str]) -> list[str] | None:
    """The distinct texts of ``texts`` not in the content cache, or None: the encoding has no
    attached engine to count several in one call."""
    if not isinstance(encoding, TiktokenEncoding) or encoding.engine == "tiktoken":
        return None
    return [t for t in dict.fromkeys(texts) if t and _CACHE.get((encoding.name, t)) is None]


def count_together(encoding: Encoding, texts: Iterable[str]) -> None:
    """Count ``texts`` (those not in the content cache) in one call of the encoding's attached
    engine, where each would be a call of its own when first needed: a compacted tier's 75 kept
    texts took 0.72 ms as calls of their own. Without an attached engine, nothing is done here."""
    wanted = _uncached(encoding, texts)
    if wanted and isinstance(encoding, TiktokenEncoding):
        _cache_each(encoding, wanted)


def count_ahead(encoding: Encoding, texts: Iterable[str]) -> CountingAhead:
    """Start counting ``texts`` (those not in the content cache) on a thread, in one call of the
    encoding's attached engine (:mod:`.fast`), which releases the GIL: the caller's thread goes
    on with what holds the GIL meanwhile (an assembly's volatile-value check), then calls
    :meth:`CountingAhead.wait`. The counts are the ones :func:`analyze` would make: only who
    makes them, and when, changes. Nothing is started without an attached engine (tiktoken
    would be called once a text, each call taking the GIL back from the caller's thread: the
    legal example's texts took 29-35 ms so, against 23 ms one after the other), nor for fewer
    than :data:`AHEAD_MIN_CHARS` characters."""
    wanted = _uncached(encoding, texts)
    if (
        wanted is None
        or sum(map(len, wanted)) < AHEAD_MIN_CHARS
        or not isinstance(encoding, TiktokenEncoding)
    ):
        return CountingAhead()
    return CountingAhead(encoding, wanted)


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

    def count_all(self, texts: Iterable[str]) -> int:
        """Reported tokens of several texts sent together (raw counts summed, then scaled once,
        as a block or tier is counted)."""
        return self.scale(sum(self.raw(t) for t in texts))
