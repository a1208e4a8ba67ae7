"""The tokenizer plug point: what ctxbudget needs from an encoding, and the tiktoken adapter."""

from __future__ import annotations

import contextlib
import operator
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from operator import itemgetter
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from ..errors import ConfigError, InvalidRequestError
from ..loaded import loaded_numpy
from .small import SMALL_TOTAL_CHARS, SmallTexts

__all__ = [
    "JOINER",
    "Encoding",
    "TiktokenEncoding",
    "TokenIds",
    "first_boundary",
    "first_space_boundary",
    "is_error",
    "is_panic",
    "last_boundary",
    "last_space_boundary",
    "length_table",
    "long_blank_run",
]

T = TypeVar("T")

PARALLEL_MIN_CHARS = 50_000
# A text over twice this many characters is encoded in pieces of about this size (see _cuts).
PIECE_CHARS = 262_144
# A long text is cut in at least this many pieces for its two threads: a thread whose CPU is taken
# meanwhile (another process, a store's checkpoint) then holds up a quarter of the text, not half,
# while the other thread takes the rest (a 100,000-token text, 60 encodes each way: the median
# 8.5 ms either way, the slowest 16.8 ms in halves, 13.4 ms in quarters).
FEWEST_PIECES = 4
# The special token that texts counted together are joined with, and the most characters joined in
# one call (:meth:`TiktokenEncoding._joined_lengths`).
JOINER = "<|endoftext|>"
JOINED_CHARS = 2 * PIECE_CHARS
# Token lengths are stored one byte a token (see ``counter.ChunkAnalysis``); the longest token
# of o200k_base and cl100k_base is 128 bytes.
MAX_TOKEN_BYTES = 255
# Hard boundaries: positions where o200k_base and cl100k_base always end a token, whatever text
# surrounds them. BPE merges never cross pre-tokens, so it is enough that the split pattern
# always ends a pre-token there; both patterns' alternatives are (1) letter runs with at most one
# leading non-letter, non-newline character and an optional contraction suffix, (2) digit runs,
# (3) an optional space, a run of punctuation, then newlines (and "/" in o200k), (4) runs of
# whitespace. Hence:
# - before a space that follows a non-whitespace character: the pre-token holding that
#   character is of kind 1-3, and none of them can continue with a space (a space may only be
#   the first character of a pre-token);
# - after a newline followed by a character that is neither whitespace nor "/": a pre-token
#   that holds a newline is whitespace only (4) or ends with the newline run (3), and neither
#   can continue with such a character.
# Text cut at a hard boundary encodes to the same tokens as the two pieces encoded apart. The
# proof covers only these two patterns: other encodings report ``proven_boundaries = False``.
_HARD_BOUNDARY = re.compile(r"(?<=\n)(?=[^\s/])|(?<=\S)(?= )")
_SPACE_BOUNDARY = re.compile(r"(?<=\S) ")
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ctxbudget-encode")
        return _POOL


def _forget_pool() -> None:
    """In a child process forked from this one: the pool's threads are not in it, and the pool
    took one for idle and queued the halves of a long text for it for ever (a forked worker of a
    server hung on its first long text)."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_pool)


# tiktoken's regex overflows its stack on a run of about 985,000 whitespace characters (measured
# with o200k_base and cl100k_base, for every whitespace character): such a run is refused up
# front at 400,000. Whitespace is tiktoken's (Unicode White_Space: Python's \s less \x1c-\x1f);
# "\r" and "\n" break a run: ``\s*[\r\n]+`` takes whitespace up to its last newline without
# overflowing (a million newlines, or "\n " repeated, are tokenized), so only the stretches
# between newlines count (one that a newline ends is refused too: a margin, like the 400,000).
# A long run covers every 4,096th character of its stretch, so it is looked for first in that
# sample (1 µs on 500 kB: at least 97 sampled blanks in a row), and the text is scanned
# (2.5 ms on 588 kB) only when the sample holds such a row.
_LONG = 400_000
_BLANK = r"[^\S\r\n\x1c-\x1f]"
# Maximal runs, each matched once (a bounded repeat such as {400000,} is retried from every
# position of a shorter run: quadratic, minutes on runs of 300,000 spaces).
_BLANK_RUN = re.compile(f"{_BLANK}+")
_STRIDE = 4096
_SAMPLED_SPACE = re.compile(f"{_BLANK}{{{_LONG // _STRIDE},}}")


def long_blank_run(text: str) -> int:
    """The longest run of whitespace without a newline over 400,000 characters in ``text`` (0: none)."""
    if len(text) <= _LONG or _SAMPLED_SPACE.search(text[::_STRIDE]) is None:
        return 0
    longest = max((m.end() - m.start() for m in _BLANK_RUN.finditer(text)), default=0)
    return longest if longest >= _LONG else 0


def length_table(name: str, byte_lengths: Iterable[int]) -> bytes:
    """Each token's length in bytes, by rank, as a byte a token (:class:`ConfigError` for a length
    over :data:`MAX_TOKEN_BYTES` or below 0). Read value by value: ``bytes()`` of a numpy or
    ``array`` table would take its raw memory (8 or 4 bytes a token), not its values.

    Bytes, not a list: a list of 200,000 ints is a container the cycle collector traverses in
    every collection of its generation (about 1 ms each, a long history's fit ending in one);
    bytes are not tracked. Indexing either gives the same ints."""
    # A list or tuple is read by its values already (bytes() reads a buffer's memory instead), and
    # bytes() checks them in C: the bundled o200k table in 0.8 ms, where a comprehension of
    # ``operator.index`` and a max and min took 7.6 ms of each process's first count.
    try:
        values = (
            byte_lengths
            if isinstance(byte_lengths, (bytes, list, tuple))
            else [operator.index(n) for n in byte_lengths]
        )
        return bytes(values)
    except TypeError as exc:
        raise ConfigError(f"encoding {name!r}: token lengths are whole numbers of bytes ({exc})") from None
    except ValueError:  # a length outside 0-255: which one, said
        longest = max(values)
        if longest > MAX_TOKEN_BYTES:
            raise ConfigError(
                f"encoding {name!r} has a {longest}-byte token; at most {MAX_TOKEN_BYTES} is supported"
            ) from None
        raise ConfigError(
            f"encoding {name!r} has a token of {min(values)} bytes: lengths are 0 to {MAX_TOKEN_BYTES}"
        ) from None


class _Untokenizable(Exception):
    """A text the tokenizer would panic on."""


def is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust extension's panic (tiktoken's, quicktok's, a plug-in's): pyo3's
    ``PanicException`` derives from ``BaseException``, so ``except Exception`` lets it through."""
    return type(exc).__name__ == "PanicException"


def is_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an error: an ``Exception``, or a Rust extension's panic (:func:`is_panic`),
    not an interrupt, an exit or a cancellation."""
    return isinstance(exc, Exception) or is_panic(exc)


# What tiktoken's encode into a buffer is told to allow: no special token (every text is ordinary
# text, as ``encode_ordinary`` reads it), or the joiner of texts counted together.
_NO_SPECIAL: frozenset[str] = frozenset()
_JOINER_ONLY = frozenset({JOINER})


def _buffer_encoder(encoding: Any) -> Callable[[str, frozenset[str]], Any] | None:
    """tiktoken's encode into a buffer of its ids (4 bytes a token, native byte order; what its
    public ``encode_to_numpy`` wraps, without numpy), or None for an encoding without one."""
    return getattr(getattr(encoding, "_core_bpe", None), "encode_to_tiktoken_buffer", None)


def _picked(indexes: Sequence[int], table: Sequence[Any]) -> tuple[Any, ...]:
    """``table``'s item at each of ``indexes``, in one C call (``itemgetter``; of one index it
    gives the item, not a tuple of it)."""
    if len(indexes) > 1:
        return itemgetter(*indexes)(table)  # type: ignore[no-any-return]
    return tuple(table[i] for i in indexes)


def _gathered(ids: Sequence[int], table: bytes) -> bytes:
    """The byte length of each token of ``ids``, one byte a token, read from ``table`` (a byte a
    rank)."""
    return bytes(_picked(ids, table))


def ids_lengths(ids: bytes, table: bytes) -> bytes:
    """The byte length of each token of ``ids`` (4 bytes a token, native order), read from
    ``table`` (a byte a rank): with numpy when the process has loaded it (0.13 ms for 100,000
    tokens), else in Python (3.3 ms: a list of the ids, then one gather)."""
    if not ids:
        return b""
    numpy = loaded_numpy()
    if numpy is not None:
        return bytes(numpy.frombuffer(table, numpy.uint8)[numpy.frombuffer(ids, numpy.uint32)].tobytes())
    return _gathered(memoryview(ids).cast("I").tolist(), table)


# A token's bytes in a start mask, by its byte length: 1 at its first byte, then 0s (``_MARKS[n]``
# is n bytes long).
_MARKS = (b"", *(b"\x01" + bytes(n - 1) for n in range(1, 256)))


def lengths_mask(lengths: bytes) -> bytes:
    """A byte a byte of the tokens of ``lengths``: 1 at each token's first byte, else 0 (a token
    of no bytes has no mark)."""
    return b"".join(_picked(lengths, _MARKS))


# A length table's marks by rank are built once this many tokens were marked without them:
# building them takes about 3 ms for o200k_base, what marking some 150,000 tokens' ids instead of
# their lengths saves (the legal example's 71k: 3.7 -> 2.3 ms). A process that has marked this
# many is taken to mark more; one that marks fewer (a command's one assembly) never builds them.
MARKS_AFTER_TOKENS = 100_000


class _RankMarks:
    """Each length table's :data:`_MARKS` by rank, for the last few tables (None for a table with
    a rank of no bytes: a token of no bytes would have no mark in a mask), built once
    :data:`MARKS_AFTER_TOKENS` tokens were marked without them."""

    def __init__(self) -> None:
        self._tables: dict[bytes, tuple[bytes, ...] | None] = {}
        self._waited = 0

    def of(self, table: bytes, tokens: int) -> tuple[bytes, ...] | None:
        """The marks of ``table``, or None: not built yet (``tokens`` are marked without them), or
        a rank has no bytes."""
        if table in self._tables:
            return self._tables[table]
        self._waited += tokens
        if self._waited < MARKS_AFTER_TOKENS:
            return None
        if len(self._tables) >= 4:  # a tuple of a reference a rank: 1.6 MB for o200k_base
            self._tables.clear()
        marks = self._tables[table] = _marks_of(table)
        return marks


def _marks_of(table: bytes) -> tuple[bytes, ...] | None:
    return None if 0 in table else _picked(table, _MARKS)


_RANK_MARKS = _RankMarks()


# Ids marked at a time: a Python int each while they are (36 bytes), so a text's ids are read a
# slice at a time (a 524 kB text of 347k tokens peaked at 40 MB read whole, 31 MB as lengths).
_MARKED_IDS = 1 << 16


def _ids_mask(ids: bytes, marks: tuple[bytes, ...]) -> bytes:
    """:func:`lengths_mask` of the tokens of ``ids`` (4 bytes a token), read from their ranks."""
    view = memoryview(ids).cast("I")
    slices = (view[at : at + _MARKED_IDS].tolist() for at in range(0, len(view), _MARKED_IDS))
    return b"".join(b"".join(_picked(listed, marks)) for listed in slices)


class TokenIds:
    """A text's token ids as tiktoken's buffer holds them (4 bytes a token, native byte order,
    in the pieces they were encoded in), with the vocabulary's length table: their number is the
    text's count, and each token's length (:meth:`lengths`) is read from the table only when a
    caller needs where the tokens end.

    A count is most of what is asked of a text: the legal example's assembly reads no token's
    end in any of its 125 texts, a 100,000-token message passed through the gateway reads none.
    As a list, tiktoken made a Python int of every id (1.1 ms for 100,000 tokens) and the gather
    from the table took 1.5 ms more, both holding the GIL: a thread counting ahead waited for it
    while the caller's regexes held it, and a long text's two threads waited for each other.
    Read from the buffer when asked, the lengths cost about 0.7 ms more for 100,000 tokens
    (:func:`ids_lengths`)."""

    __slots__ = ("_pieces", "_table", "count")

    def __init__(self, pieces: tuple[bytes, ...], table: bytes) -> None:
        self._pieces = pieces
        self._table = table
        self.count = sum(map(len, pieces)) // 4

    def lengths(self) -> bytes:
        """Each token's byte length, one byte a token."""
        return b"".join(ids_lengths(piece, self._table) for piece in self._pieces)

    def start_mask(self) -> bytes | None:
        """:func:`lengths_mask` of the tokens, read from their ids in one gather, where their lengths
        would be gathered first and then marked (the legal example's 105 pages, 71k tokens: 3.7 ->
        2.3 ms); None when the table's marks are not built yet (:data:`MARKS_AFTER_TOKENS`) or a
        rank of it has no bytes."""
        marks = _RANK_MARKS.of(self._table, self.count)
        if marks is None:
            return None
        return b"".join(_ids_mask(piece, marks) for piece in self._pieces)

    @staticmethod
    def joined(parts: Sequence[bytes | TokenIds]) -> bytes | TokenIds:
        """The tokens of pieces of one text, in order: ids while every piece's are, else lengths."""
        if all(isinstance(part, TokenIds) for part in parts) and parts:
            pieces = tuple(piece for part in parts for piece in part._pieces)  # type: ignore[union-attr]
            return TokenIds(pieces, parts[0]._table)  # type: ignore[union-attr]
        return b"".join(part if isinstance(part, bytes) else part.lengths() for part in parts)


def _aligned_find(data: bytes, mark: bytes, start: int) -> int:
    """Where the 4-byte id ``mark`` stands in ``data`` (ids of 4 bytes) from ``start`` on: a
    match that straddles two ids is passed over; -1 when none stands there."""
    at = data.find(mark, start)
    while at >= 0 and at % 4:
        at = data.find(mark, at + 1)
    return at


def first_boundary(text: str, start: int = 1) -> int | None:
    """The first hard boundary of ``text`` at or after ``start``, strictly inside the text."""
    match = _HARD_BOUNDARY.search(text, max(start, 1))
    if match is None or match.start() >= len(text):
        return None
    return match.start()


def last_boundary(text: str, at: int, reach: int) -> int | None:
    """The last hard boundary of ``text`` at or before ``at`` (the text's start is one), looked
    for at most ``reach`` characters back; None when there is none that near. Found with
    ``rfind`` from ``at`` backwards (a boundary is usually a few characters away)."""
    if at <= 0:
        return 0
    low = max(1, at - reach)
    found = -1
    space = text.rfind(" ", low, at + 1)
    while space > 0:  # a space after a non-space
        if not text[space - 1].isspace():
            found = space
            break
        space = text.rfind(" ", low, space)
    newline = text.rfind("\n", max(found, low - 1), min(at, len(text) - 1))
    while newline >= 0 and newline + 1 > found:  # after a newline, before neither a blank nor "/"
        after = text[newline + 1]
        if not after.isspace() and after != "/":
            found = newline + 1
            break
        newline = text.rfind("\n", max(found, low - 1), newline)
    if found >= 0:
        return found
    return 0 if at - reach <= 0 else None


def first_space_boundary(text: str) -> int | None:
    """The first space that follows a non-space in ``text`` (a hard boundary), if any."""
    match = _SPACE_BOUNDARY.search(text)
    return None if match is None else match.start()


def last_space_boundary(text: str) -> int | None:
    """The last space that follows a non-space in ``text`` (a hard boundary), if any."""
    position = text.rfind(" ")
    while position > 0:
        if not text[position - 1].isspace():
            return position
        position = text.rfind(" ", 0, position)
    return None


class FastEncoder(Protocol):
    """A faster engine of an encoding's own token ids (:class:`.fast.FastEngine`): each answer is
    tiktoken's, or None for a text it leaves to tiktoken."""

    def encode(self, text: str) -> list[int] | None: ...

    def lengths(self, text: str) -> bytes | None: ...

    def lengths_each(self, texts: Sequence[str]) -> list[bytes | None]: ...


@runtime_checkable
class Encoding(Protocol):
    """A byte-level tokenizer: text in, token ids out, and each token's length in bytes.

    Byte lengths let the fitter place every token at a byte offset of the text it came from,
    so one encode of a rendered request yields the cost of each part and the cost of any prefix.
    """

    @property
    def name(self) -> str:
        """The encoding's registered name, such as ``o200k_base``."""
        ...

    @property
    def proven_boundaries(self) -> bool:
        """True when the encoding always ends a token at this module's hard boundaries."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; text that looks like a special token is ordinary text."""
        ...

    def token_lengths(self, text: str) -> bytes:
        """The byte length of each token of ``text``, in order, one byte a token."""
        ...


class TiktokenEncoding:
    """An :class:`Encoding` backed by a real ``tiktoken.Encoding``.

    ``proven_boundaries`` must only be set for encodings whose split pattern is covered by the
    proof above (o200k_base, cl100k_base); it enables the two-thread encode of long texts.
    Given a ``build`` instead of an encoding, it builds the tiktoken encoding only when a text
    needs it: short texts are encoded by a :class:`~.small.SmallTexts` first (same tokens; see
    that module). A faster engine of the same ids may be attached (:meth:`attach_fast`,
    :mod:`.fast`): it then encodes every text it takes, tiktoken the rest.
    """

    def __init__(
        self,
        encoding: Any,
        byte_lengths: Sequence[int],
        *,
        proven_boundaries: bool = False,
        name: str | None = None,
        build: Callable[[], Any] | None = None,
        small: SmallTexts | None = None,
        bundled: bool = False,
    ) -> None:
        """``encoding`` a ``tiktoken.Encoding``, or None with its ``name`` and a ``build`` that
        makes it when a text first needs it (``small`` encodes short texts until then).
        ``bundled``: built from the bundled vocabulary of ``name`` (:mod:`.bundled` says so)."""
        self._name = str(encoding.name if encoding is not None else name)
        if encoding is None and build is None:
            raise ConfigError(f"encoding {self._name!r}: give a tiktoken encoding or a build for one")
        self._encoding = encoding
        self._byte_lengths = length_table(self._name, byte_lengths)
        self._proven = proven_boundaries
        self._build = build
        self._small = small if encoding is None else None
        self._fast: FastEncoder | None = None  # a faster engine of the same ids (:mod:`.fast`)
        self._bundled = bundled
        self._joined: bytes | None = None  # :meth:`_joined_table`, made when first needed
        self._build_lock = threading.Lock()

    @property
    def name(self) -> str:
        """The tiktoken encoding name."""
        return self._name

    @property
    def tiktoken(self) -> Any:
        """The underlying ``tiktoken.Encoding`` (for callers that need its full API; built now
        if it was deferred)."""
        return self._built()

    @property
    def proven_boundaries(self) -> bool:
        """Whether hard boundaries are proven for this encoding's split pattern."""
        return self._proven

    @property
    def byte_lengths(self) -> bytes:
        """Each token's length in bytes, by rank (a byte a token)."""
        return self._byte_lengths

    @property
    def bundled(self) -> bool:
        """Whether this is the bundled vocabulary and split of its name, the only encodings a
        faster engine may be attached to (one registered again under the name may rank other
        tokens, with the same length table)."""
        return self._bundled

    @property
    def engine(self) -> Literal["tiktoken", "quicktok"]:
        """What encodes texts now: ``"tiktoken"``, or ``"quicktok"`` once attached (:mod:`.fast`)."""
        return "tiktoken" if self._fast is None else "quicktok"

    def attach_fast(self, engine: FastEncoder | None) -> None:
        """Encode with ``engine`` from now on (None: with tiktoken again): its ``encode`` and
        ``lengths`` give tiktoken's answers, or None for a text they leave to tiktoken
        (:class:`.fast.FastEngine`, checked by :func:`.fast.use_fast_tokenizer` first)."""
        self._fast = engine
        if engine is not None:
            self._small = None  # the attached engine is faster on short texts too

    def __getstate__(self) -> dict[str, Any]:
        """What a pickle or a deep copy keeps: the built encoding (built now if deferred), not the
        lock, the builder or the small-text encoder."""
        state = dict(self.__dict__)
        state.update(_encoding=self._built(), _build=None, _small=None, _fast=None, _joined=None)
        del state["_build_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(
            {"_fast": None, "_bundled": False, "_joined": None, **state}
        )  # also a pickle of a version before them
        self._byte_lengths = bytes(self._byte_lengths)  # a list in a pickle of a version before 0.53
        self._build_lock = threading.Lock()

    def _built(self) -> Any:
        if self._encoding is None:
            with self._build_lock:
                if self._encoding is None:
                    assert self._build is not None
                    self._encoding = self._build()
                    self._small = None  # the built encoder is faster from now on
        return self._encoding

    def encode(self, text: str) -> list[int]:
        """Encode with ``encode_ordinary``: special-token text is counted, never raised on.

        A long text is cut at hard boundaries (see :meth:`_cuts`) and its pieces are encoded on
        two threads (tiktoken releases the GIL); the result is identical.
        """
        cuts = self._cuts(text)
        if cuts is None:
            return self._ordinary(text)
        result: list[int] = []
        for ids in _pool().map(lambda span: self._ordinary(text[span[0] : span[1]]), pairwise(cuts)):
            result.extend(ids)
        return result

    def decode(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens`` (bytes that are not whole UTF-8 characters become U+FFFD)."""
        return str(self._built().decode(list(tokens)))

    def token_lengths(self, text: str) -> bytes:
        """Each token's byte length, one byte a token: from an attached engine in one call (its
        ids an array, 4 bytes a token), else with tiktoken, a long text's pieces on two threads.

        With tiktoken, the gather from the vocabulary's length table runs in the same thread as
        the encode, so one piece's gather overlaps the other thread's encode (measured: 1.3 ms of
        31 ms saved on the 114k-token example); each piece's token ids are dropped as soon as they
        are measured, and a piece is sliced from the text only when its thread takes it, so what a
        long text holds in memory at once is the lengths (a byte a token) and two pieces' ids.
        """
        fast = self._fast
        found = fast.lengths(text) if fast is not None and not long_blank_run(text) else None
        if found is not None:  # the attached engine's, in one call (its ids: an array, 4 bytes each)
            return found
        cuts = self._cuts(text)
        return self._lengths_of(text) if cuts is None else self._pieces_lengths(text, cuts)

    def _pieces_lengths(self, text: str, cuts: list[int]) -> bytes:
        """The lengths of ``text`` cut at ``cuts``, its pieces on two threads."""
        return b"".join(_pool().map(lambda span: self._lengths_of(text[span[0] : span[1]]), pairwise(cuts)))

    def measured(self, text: str, *, ends: bool = False) -> bytes | TokenIds:
        """:meth:`token_lengths`, or where tiktoken encodes, its ids to read them from when they
        are first needed (:class:`TokenIds`): a count needs their number alone. A long text's
        pieces are encoded on two threads, as there; neither takes the GIL for a token.

        ``ends``: the caller will read where the tokens end (a span, a cut). Without numpy loaded
        they are measured now, from tiktoken's list (2.6 ms for 100,000 tokens, against 3.3 ms
        read from its ids later); with numpy the ids are kept all the same (0.13 ms to read).

        A text of more than two pieces' characters (``2 * PIECE_CHARS``) gets its lengths
        (:meth:`token_lengths`): its ids would hold 4 bytes a token for as long as it is cached (a
        million tokens, 4 MB; a text of one token a byte, four times its size), where what a long
        text holds at once is bounded by two pieces' ids."""
        fast = self._fast
        found = fast.lengths(text) if fast is not None and not long_blank_run(text) else None
        if found is not None:
            return found
        cuts = self._cuts(text)
        now = ends and loaded_numpy() is None
        lengths = now or len(text) > 2 * PIECE_CHARS  # a long text with no boundary to cut at too
        if cuts is None:
            return self._lengths_of(text) if lengths else self._ids_or_lengths(text)
        if lengths:
            return self._pieces_lengths(text, cuts)
        return TokenIds.joined(
            list(_pool().map(lambda span: self._ids_or_lengths(text[span[0] : span[1]]), pairwise(cuts)))
        )

    def token_lengths_each(self, texts: Sequence[str]) -> list[bytes | None] | None:
        """:meth:`token_lengths` of each text, counted together by calls that release the GIL:
        the attached engine's, in one call (None for a text it leaves to tiktoken), else
        tiktoken's (:meth:`_joined_lengths`); None when neither can take them together."""
        found = self.measured_each(texts, ends=True)
        return None if found is None else [t.lengths() if isinstance(t, TokenIds) else t for t in found]

    def measured_each(
        self, texts: Sequence[str], *, ends: bool = False
    ) -> list[bytes | TokenIds | None] | None:
        """:meth:`measured` of each text (``ends`` as there), counted together as
        :meth:`token_lengths_each` counts them (None where it gives None)."""
        fast = self._fast
        if fast is None:
            return self._joined_lengths(texts, not ends or loaded_numpy() is not None)
        refused = [bool(long_blank_run(t)) for t in texts]  # left to tiktoken's check, which raises
        found = iter(fast.lengths_each([t for t, no in zip(texts, refused, strict=True) if not no]))
        return [None if no else next(found) for no in refused]

    def _joined_lengths(self, texts: Sequence[str], ids: bool) -> list[bytes | TokenIds | None] | None:
        """:meth:`measured` of each text from tiktoken calls over the texts joined by
        :data:`JOINER`, a special token tiktoken is told to allow: it encodes the text between two
        of them apart, as ``encode_ordinary`` would each text alone, and puts the special token's
        id between (no other special token of o200k_base or cl100k_base holds the joiner, and no
        end of it is a start of it, so a match never reaches into a text). A call releases the
        GIL once for all its texts, where a call a text took the GIL back after each: another
        thread's regexes then held the encode up to a switch interval (5 ms) a text. A call takes
        at most :data:`JOINED_CHARS` characters (its ids are Python ints, 36 bytes a token, until
        they are measured: two pieces' worth, as a long text's two-thread encode holds); a text
        longer than that is counted alone, in pieces.

        None (each counted when needed) for an encoding not bundled (its special tokens unknown)
        or not yet built when the texts are few enough characters for the small-text path
        (:mod:`.small`: building takes about 95 ms). A text holding the joiner, or a whitespace
        run tiktoken fails on, is None: it is counted alone, where its error is raised."""
        if not self._bundled or (
            self._encoding is None and self._small is not None and sum(map(len, texts)) <= SMALL_TOTAL_CHARS
        ):
            return None
        found: list[bytes | TokenIds | None] = [None] * len(texts)
        batch: list[int] = []
        chars = 0
        for i, text in enumerate(texts):
            if JOINER in text or long_blank_run(text):
                continue
            if len(text) > JOINED_CHARS:
                found[i] = self.measured(text) if ids else self.token_lengths(text)
                continue
            if chars + len(text) > JOINED_CHARS:
                self._joined_batch(texts, batch, found, ids)
                batch, chars = [], 0
            batch.append(i)
            chars += len(text)
        self._joined_batch(texts, batch, found, ids)
        return found

    def _joined_batch(
        self, texts: Sequence[str], batch: list[int], found: list[bytes | TokenIds | None], ids: bool
    ) -> None:
        """Set ``found[i]`` for each ``i`` of ``batch`` from one call (none set if tiktoken panics
        on the joined text: each is then counted alone, where the error names its text): with
        ``ids``, each text's ids between two joiners, read from tiktoken's buffer, else its lengths."""
        if not batch:
            return
        encoding = self._built()
        joiner = encoding.encode_single_token(JOINER)
        joined = JOINER.join([texts[i] for i in batch])
        buffered = _buffer_encoder(encoding) if ids else None
        try:
            if buffered is not None:
                with contextlib.suppress(UnicodeEncodeError):  # a lone surrogate: read as a list below
                    self._split_ids(bytes(buffered(joined, _JOINER_ONLY)), joiner, batch, found)
                    return
            listed = encoding.encode(joined, allowed_special={JOINER}, disallowed_special=())
        except BaseException as exc:
            if not is_panic(exc):
                raise
            return
        table = self._joined_table(joiner)
        if table is None:  # a token of no bytes: a 0 would not tell where a text ends
            start = 0
            for k, i in enumerate(batch):
                end = listed.index(joiner, start) if k + 1 < len(batch) else len(listed)
                found[i] = self._gathered(listed[start:end])
                start = end + 1
            return
        lengths = self._gathered(listed, table)  # the joiner's length 0, every other token's 1-255
        start = 0
        for k, i in enumerate(batch):
            end = lengths.find(0, start) if k + 1 < len(batch) else len(lengths)
            found[i] = lengths[start:end]
            start = end + 1

    def _split_ids(
        self, ids: bytes, joiner: int, batch: list[int], found: list[bytes | TokenIds | None]
    ) -> None:
        """Set ``found[i]`` for each ``i`` of ``batch`` to its text's ids in ``ids`` (the joined
        texts' buffer, 4 bytes a token), cut at each joiner's id."""
        mark = joiner.to_bytes(4, sys.byteorder)
        start = 0
        for k, i in enumerate(batch):
            end = _aligned_find(ids, mark, start) if k + 1 < len(batch) else len(ids)
            found[i] = TokenIds((ids[start:end],), self._byte_lengths)
            start = end + 4

    def _joined_table(self, joiner: int) -> bytes | None:
        """The length table with ``joiner``'s length 0 (and any rank between 0 too: none is
        encoded), so the texts of one call are split at each 0 of its gathered lengths by
        ``bytes.find`` (the legal example's 125 texts: 2.2 -> 1.4 ms, where each text's ids were
        found by ``list.index`` and gathered apart); None when a token of the table has no bytes."""
        table = self._joined
        if table is None or len(table) != joiner + 1:
            lengths = self._byte_lengths
            if 0 in lengths or joiner < len(lengths):
                return None
            table = self._joined = lengths + bytes(joiner + 1 - len(lengths))
        return table

    def _ordinary(self, text: str) -> list[int]:
        """tiktoken's ``encode_ordinary`` (or the attached or small-text engine's answer)."""
        fast, small = self._fast, self._small

        def ids() -> list[int]:
            found = (
                fast.encode(text) if fast is not None else small.encode(text) if small is not None else None
            )
            return self._built().encode_ordinary(text) if found is None else found

        return self._guarded(text, ids)

    def _ids_or_lengths(self, text: str) -> bytes | TokenIds:
        """One piece's :meth:`measured`: tiktoken's ids as its buffer holds them, or the lengths
        where the small-text engine may take the text (tiktoken not built yet), where this
        tiktoken has no buffer, or where the text holds a lone surrogate (tiktoken's list path
        mends it as ``encode_ordinary`` does)."""
        buffered = None if self._small is not None else _buffer_encoder(self._built())
        if buffered is not None:
            with contextlib.suppress(UnicodeEncodeError):
                ids = self._guarded(text, lambda: bytes(buffered(text, _NO_SPECIAL)))
                return TokenIds((ids,), self._byte_lengths)
        return self._lengths_of(text)

    def _guarded(self, text: str, encode: Callable[[], T]) -> T:
        """``encode()`` of ``text``; tiktoken's Rust panic on a pathological text (a run of about
        a million spaces overflows its regex's stack) is bad input, not a crash."""
        run = long_blank_run(text)
        try:
            if run:
                raise _Untokenizable  # refused before the tokenizer panics (and prints its trace)
            return encode()
        except BaseException as exc:
            if not (is_panic(exc) or isinstance(exc, _Untokenizable)):
                raise
            raise InvalidRequestError(
                f"a text of {len(text):,} characters cannot be tokenized"
                + (f" (it holds a run of {run:,} whitespace characters)" if run else "")
                + f"; the {self.name} tokenizer fails on it: shorten or normalize the text",
                "",  # a text, not a body: a fit names the item that holds it (untokenizable_located)
            ) from None

    def _lengths_of(self, text: str) -> bytes:
        return self._gathered(self._ordinary(text))

    def _gathered(self, ids: list[int], table: bytes | None = None) -> bytes:
        """The byte length of each token of ``ids``, one byte a token (read from ``table``, by
        default the encoding's)."""
        return _gathered(ids, self._byte_lengths if table is None else table)

    def _cuts(self, text: str) -> list[int] | None:
        """Offsets cutting a long text into pieces at hard boundaries: :data:`FEWEST_PIECES`, or
        more pieces of about ``PIECE_CHARS`` each for a longer text (a million-token text encoded
        whole holds its million token ids as Python ints, about 36 MB, at once; in pieces, two
        pieces' worth). None: encode it whole (short, no proven boundaries, or no boundary found;
        or a whitespace run tiktoken fails on, which is refused with the whole text's size, not a
        piece's)."""
        if not self._proven or len(text) < PARALLEL_MIN_CHARS or long_blank_run(text):
            return None
        count = max(FEWEST_PIECES, -(-len(text) // PIECE_CHARS))
        cuts = [0]
        for k in range(1, count):
            cut = first_boundary(text, max(cuts[-1] + 1, len(text) * k // count))
            if cut is None:
                break
            cuts.append(cut)
        return None if len(cuts) == 1 else [*cuts, len(text)]
