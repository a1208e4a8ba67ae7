"""Counting with a content cache: each distinct text is tokenized once per process.

:func:`analyze` encodes a text once and keeps, for each token, the byte offset where it ends.
From that one pass the fitter reads the cost of every part of a rendered request and of any
prefix of it (a sentence boundary, a token-level cut) without tokenizing again.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import accumulate
from typing import Any
from zlib import adler32

from ..errors import InvalidRequestError
from ..loaded import loaded_numpy
from ..weighed import WeighedLRU
from . import crew
from .encoding import Encoding, TiktokenEncoding, TokenIds, lengths_mask
from .registry import registry_version, when_replaced

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
    "remember",
]


BLOCK = 64  # tokens a block; at most 255 bytes a token keeps a block's byte sum below 65,521
# Where numpy is loaded, every token's end is read at once (:meth:`ChunkAnalysis._every_end`) once
# the blocks looked up one at a time are a 32nd of the text's and at least this many. A block
# built alone costs about 1.7 us; every end read at once about 0.7 us per 1,000 tokens, some 40
# times less than all the blocks: the blocks built before the switch cost about what it does. A
# cut's binary search reads a block or two a step; a split into passages reads nearly every block.
WHOLE_AFTER_BLOCKS = 16
WHOLE_SHARE = 32
_UNSIGNED_TOKENS = ((1 << 32) - 1) // 255  # tokens whose ends always fit 4 bytes
# A text's tokens per offset asked at once below which :meth:`ChunkAnalysis.tokens_starting_before_each`
# sums every token's end (some 30 ns a token) rather than looking each offset up by its block
# (2-5 us with the block built; 1-2 us once it is).
TOKENS_A_LOOKUP = 100


class ChunkAnalysis:
    """One text encoded once: the text, its size in UTF-8 bytes and each token's length in bytes.

    Token lengths are kept as ``bytes`` (one byte a token; no token of a supported encoding is
    longer than 255 bytes) rather than the encoder's list of ids: a ``bytes`` object is not
    tracked by Python's cycle collector, which otherwise re-traverses every cached token on
    each collection (measured: 6-9 ms of a 60 ms cold fit of 114k tokens). Token end offsets
    are lazily kept as per-block running sums (64 tokens a block) plus, for blocks that are
    looked up, each token's absolute end, so a lookup scans at most one block. Where numpy is
    loaded, a text with a 32nd of its blocks looked up has every token's end read at once.

    Counted by tiktoken, the analysis holds its ids until a caller first reads where its tokens
    end (:class:`~.encoding.TokenIds`, 4 bytes a token, untracked too): a count is their number.
    """

    __slots__ = ("_block_ends", "_blocks", "_ends_all", "_ids", "_lengths", "size", "text")

    def __init__(self, text: str, lengths: bytes | TokenIds) -> None:
        self.text = text  # the cache's key holds it already: no copy of its bytes is kept
        self._ids: TokenIds | None = lengths if isinstance(lengths, TokenIds) else None
        self._lengths: bytes | None = None if isinstance(lengths, TokenIds) else lengths
        self.size = len(text) if text.isascii() else _utf8_size(text)
        self._block_ends: list[int] | None = None
        self._blocks: dict[int, array[int]] = {}
        self._ends_all: array[int] | None = None

    @property
    def lengths(self) -> bytes:
        """Each token's length in bytes, one byte a token (read from its ids when first asked)."""
        found = self._lengths
        if found is None:
            ids = self._ids
            found = self._lengths  # another thread's, made meanwhile (it sets them, then drops ids)
            if found is None:
                assert ids is not None
                found = ids.lengths()
                self._lengths = found
                self._ids = None
        return found

    def start_mask(self) -> bytes | None:
        """A byte a byte of the text's UTF-8: 1 at each token's first byte, else 0; None when a
        token has no bytes (no mark would tell it). Read from the ids while no caller has read
        the lengths (:meth:`.TokenIds.start_mask`), so a text whose tokens are only marked never
        has its lengths gathered."""
        ids = self._ids
        if ids is not None and self._lengths is None:
            found = ids.start_mask()
            if found is not None:
                return found
        lengths = self.lengths
        return None if 0 in lengths else lengths_mask(lengths)

    def chars_between(self, start: int, end: int) -> int:
        """Characters of the text in the byte range ``[start, end)`` (a character cut by either
        end is not counted)."""
        if self.size == len(self.text):  # ASCII: a byte a character
            return max(0, min(end, self.size) - max(start, 0))
        return len(self.text.encode("utf-8")[start:end].decode("utf-8", "ignore"))

    @property
    def tokens(self) -> int:
        """Number of tokens of the whole text."""
        ids = self._ids
        return ids.count if ids is not None else len(self.lengths)

    def _ends(self) -> list[int]:
        ends = self._block_ends
        numpy = loaded_numpy() if ends is None else None
        if numpy is not None and self.lengths:  # each block's sum at once (100,000 tokens: 0.28 -> 0.05 ms)
            ends = self._block_ends = _block_ends_read(numpy, self.lengths)
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

    def _every_end(self) -> array[int] | None:
        """Every token's absolute byte end, read at once by numpy once enough blocks were looked up
        one at a time (:data:`WHOLE_SHARE`; then those are dropped); None before, or without numpy.
        A split of the 100,000-token document into passages looks up 976 offsets in 1,560 blocks:
        built one by one, the blocks took 2.6 ms of its 7 ms, and it now takes 4.5 ms. Kept as 4
        bytes a token, as the blocks were; a few cuts of a long text build none of it."""
        found = self._ends_all
        if found is not None:
            return found
        if len(self._blocks) < max(WHOLE_AFTER_BLOCKS, self.tokens // (BLOCK * WHOLE_SHARE)):
            return None
        numpy = loaded_numpy()
        if numpy is None:
            return None
        lengths = self.lengths
        if len(lengths) > _UNSIGNED_TOKENS and self._ends()[-1] >> 32:  # the block sums: kept
            return None  # past 4 GiB (a plug-in's lengths that do not add up): the blocks say so
        found = array("I", [0]) * len(lengths)
        _running_sums(numpy, lengths, found)
        self._ends_all = found
        self._blocks = {}
        return found

    def token_end(self, k: int) -> int:
        """The byte offset just after the ``k``-th token (counted from 0)."""
        if not 0 <= k < self.tokens:
            raise IndexError(f"token {k} of {self.tokens}")
        every = self._every_end()
        return every[k] if every is not None else self._block(k // BLOCK)[k % BLOCK]

    def _ending_before(self, byte_offset: int) -> int:
        every = self._every_end()
        if every is not None:  # the first token ending at or after the offset (len: none does)
            return bisect_left(every, byte_offset)
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

    def tokens_starting_before_each(self, offsets: Sequence[int]) -> list[int]:
        """:meth:`tokens_starting_before` of each of ``offsets``. Where there are many for the
        text's tokens (a token's end summed costs about 30 ns, a lookup by its block 2-5 us with
        the block built), every token's end is summed once, kept for the lookups after (as numpy's
        :meth:`_every_end` keeps them), and each offset found in it: a rendered RAG request's 53
        segment ends in its 2,710 tokens took 245 us by blocks, 85 us so."""
        lengths = self.lengths
        every = self._ends_all
        if (
            every is None
            and lengths
            and len(lengths) <= min(len(offsets) * TOKENS_A_LOOKUP, _UNSIGNED_TOKENS)
        ):
            every = self._ends_all = array("I", accumulate(lengths))
            self._blocks = {}
        if every is None:
            return [self.tokens_starting_before(offset) for offset in offsets]
        last = len(every) - 1
        return [0 if offset <= 0 else 1 + min(bisect_left(every, offset), last) for offset in offsets]

    def tokens_between(self, start: int, end: int) -> int:
        """Tokens that start in the byte range ``[start, end)``."""
        if start <= 0 and end >= self.size:
            return self.tokens
        return self.tokens_starting_before(end) - self.tokens_starting_before(start)

    def cut_after_tokens(self, start: int, count: int) -> int:
        """Byte offset just after the ``count``-th token starting at or after ``start``."""
        first = self.tokens_starting_before(start)
        last = min(first + count, len(self.lengths))
        return start if last <= first else self.token_end(last - 1)


# Tokens summed a step at a time by :func:`_running_sums`: numpy sums 1-byte lengths into 4-byte
# ends through a copy of its input as wide as the output (4 MB for a million tokens at once).
_SUMMED_AT_ONCE = 1 << 16


def _running_sums(numpy: Any, lengths: bytes, out: array[int]) -> None:
    """``out`` (4-byte items, ``len(lengths)`` of them) set to the running sums of ``lengths``,
    read :data:`_SUMMED_AT_ONCE` tokens at a time, each step's copy freed before the next (a
    million tokens: 0.8 ms, 0.27 MB above the output, where at once it was 4 MB)."""
    sizes, ends = numpy.frombuffer(lengths, dtype=numpy.uint8), numpy.frombuffer(out, dtype=numpy.uint32)
    carried = 0
    for start in range(0, len(sizes), _SUMMED_AT_ONCE):
        step = ends[start : start + _SUMMED_AT_ONCE]
        numpy.cumsum(sizes[start : start + _SUMMED_AT_ONCE], dtype=numpy.uint32, out=step)
        step += numpy.uint32(carried)
        carried = int(step[-1])


def _block_ends_read(numpy: Any, lengths: bytes) -> list[int]:
    """The byte end of each block of :data:`BLOCK` tokens, the whole blocks summed as rows (a
    sum of them all with an 8-byte total took a copy of 8 bytes a token: 8 MB for a million)."""
    sizes = numpy.frombuffer(lengths, dtype=numpy.uint8)
    whole = len(sizes) // BLOCK * BLOCK
    sums = sizes[:whole].reshape(-1, BLOCK).sum(axis=1, dtype=numpy.int64).tolist()
    if whole < len(sizes):
        sums.append(int(sizes[whole:].sum()))
    return list(accumulate(sums))


def _utf8_size(text: str) -> int:
    """``text``'s size in UTF-8 bytes; a lone surrogate (no provider can be sent it) is bad input,
    said as the public counts say it, not a ``UnicodeEncodeError``."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidRequestError(
            f"a string with a lone surrogate at character {exc.start} cannot be encoded as UTF-8"
        ) from None


# About 9 bytes a cached token (its length byte, the text as key and as UTF-8; 12 while its ids
# are kept instead, until its tokens' ends are first read), plus ~36 for each token of a block
# that was looked up: 2M tokens is 18-96 MB.
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


def remember(encoding: Encoding, text: str, lengths: bytes) -> None:
    """Keep ``lengths`` as the token lengths of ``text`` in the content cache, made without
    encoding it (:func:`~ctxbudget.trim.text.spliced_lengths`): they must be the ones
    :func:`analyze` would make. Not when they do not add up to the text's size."""
    analysis = ChunkAnalysis(text, lengths)
    if sum(lengths) == analysis.size:
        _CACHE.put((encoding.name, text), analysis)


def analyze(encoding: Encoding, text: str, *, ends: bool = False) -> ChunkAnalysis:
    """Encode ``text`` once (or fetch it from the content cache) with token byte offsets.

    ``ends``: the caller reads where its tokens end (a span inside it, a cut), so they are
    measured now unless numpy is loaded (:meth:`.TiktokenEncoding.measured`); else a tiktoken
    count keeps the ids until they are read (:class:`~.encoding.TokenIds`: a count needs their
    number alone)."""
    key = (encoding.name, text)
    found = _CACHE.get(key)
    if found is not None:
        return found
    counted = (
        encoding.measured(text, ends=ends)
        if isinstance(encoding, TiktokenEncoding)
        else encoding.token_lengths(text)
    )
    result = ChunkAnalysis(text, counted)
    _CACHE.put(key, result)
    return result


# Below this many characters counted ahead, the hand-off to a thread costs more than it saves.
AHEAD_MIN_CHARS = 64_000


class CountingAhead:
    """The count started ahead (:func:`count_ahead`), or nothing to wait for when none was."""

    __slots__ = ("_dropped", "_future")

    def __init__(self, future: Future[None] | None, dropped: threading.Event | None = None) -> None:
        self._future = future
        self._dropped = dropped

    def running(self) -> bool:
        """Whether the thread is still counting (the caller may do other work meanwhile)."""
        return self._future is not None and not self._future.done()

    def wait(self) -> None:
        """Return once the thread is done: the texts it counted are in the content cache, and
        any it did not (the engine left them to tiktoken, or failed) are counted when needed, as
        without counting ahead, where a failure is raised with its place."""
        if self._future is not None:
            self._future.result()
            self._future = None

    def abandon(self) -> None:
        """Return at once, leaving the thread to end alone with its counts not kept: the caller
        failed (a check's error is raised now, not once every text is counted: a refused legal
        request waited 150-250 ms for tiktoken's build and count, and its counts stayed cached).
        No thread is a daemon: a process that ends meanwhile waits for it."""
        if self._dropped is not None:
            self._dropped.set()
        self._future = None


def _cache_each(encoding: TiktokenEncoding, texts: list[str], dropped: threading.Event | None = None) -> None:
    """Count ``texts`` in one call and keep the counts, unless the encoding's name was registered
    again meanwhile (the cache was then cleared of its counts, and these are the old one's), or
    ``dropped`` was set meanwhile (no one waits for them)."""
    version = registry_version()
    found = encoding.measured_each(texts) or ()
    if registry_version() != version or (dropped is not None and dropped.is_set()):
        return
    for text, lengths in zip(texts, found, strict=False):
        if lengths is not None:
            with contextlib.suppress(InvalidRequestError):  # said where the text is counted alone
                _CACHE.put((encoding.name, text), ChunkAnalysis(text, lengths))


def _counted_ahead(encoding: TiktokenEncoding, texts: list[str], dropped: threading.Event) -> None:
    """:func:`_cache_each` on the thread of :func:`count_ahead`. What fails here is only not
    counted ahead: the caller's thread counts it when it needs it, and a failure that is the
    text's or the engine's is raised there, in its place (raised from here, it replaced the
    caller's own error, such as a volatile value found meanwhile)."""
    with contextlib.suppress(Exception):
        _cache_each(encoding, texts, dropped)


def _uncached(encoding: Encoding, texts: Iterable[str]) -> tuple[TiktokenEncoding, list[str]] | None:
    """The encoding and the distinct texts of ``texts`` not in the content cache, or None: the
    encoding cannot count several texts in one call (a plug-in's)."""
    if not isinstance(encoding, TiktokenEncoding):
        return None
    name = encoding.name
    return encoding, [key[1] for key in _CACHE.missing((name, t) for t in dict.fromkeys(texts) if t)]


def count_together(encoding: Encoding, texts: Iterable[str]) -> None:
    """Count ``texts`` (those not in the content cache) in one call of the encoding's attached
    engine or of tiktoken (:meth:`.TiktokenEncoding.measured_each`), where each would be a
    call of its own when first needed: a compacted tier's 75 kept texts took 0.72 ms as calls of
    their own with quicktok. What cannot be counted so is counted when needed."""
    found = _uncached(encoding, texts)
    if found is not None and found[1]:
        _cache_each(*found)


def count_ahead(encoding: Encoding, texts: Iterable[str]) -> CountingAhead:
    """Start counting ``texts`` (those not in the content cache) on a thread, in one call of the
    encoding's attached engine (:mod:`.fast`) or of tiktoken, whose encode releases the GIL: the
    caller's thread goes on with what holds the GIL meanwhile (an assembly's volatile-value
    check), then calls :meth:`CountingAhead.wait`. The counts are the ones :func:`analyze` would
    make: only who makes them, and when, changes.

    tiktoken counts the texts joined by a special token, in one call
    (:meth:`.TiktokenEncoding.measured_each`): a call a text took the GIL back after each,
    and waited for it while the caller's regexes held it (the legal example's texts took 29-35
    ms so, against 23 ms one after the other). Nothing is started for fewer than
    :data:`AHEAD_MIN_CHARS` characters; for more characters than half the tokens the
    content cache holds (characters standing for tokens, of which prose has three or four times
    fewer: counted ahead past that, a text could push out another before either was read); nor
    where no thread can be started."""
    texts = list(texts)
    if sum(map(len, texts)) < AHEAD_MIN_CHARS:  # not worth a look in the cache
        return CountingAhead(None)
    found = _uncached(encoding, texts)
    if found is None or not AHEAD_MIN_CHARS <= sum(map(len, found[1])) <= _CACHE.max_weight // 2:
        return CountingAhead(None)
    # On a kept thread (:mod:`.crew`: its allocator warm), handed over as a thread is
    # started: it takes the GIL at once and keeps it until the engine's call releases it. None
    # is a daemon: a daemon still in tiktoken's encode when the interpreter finalizes is ended
    # as it takes the GIL back, by an unwind through Rust's frames (the exit waits instead).
    dropped = threading.Event()
    future = crew.start(functools.partial(_counted_ahead, *found, dropped))
    return CountingAhead(future, dropped if future is not None else None)


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
