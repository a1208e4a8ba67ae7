"""Truncating one text to a token budget, using the counts of a single encode.

Candidates are sentence ends; the cost of each prefix is read from the analysis of the text as
it is rendered (no new tokenization). When even the first sentence is over budget, the cut
falls on a token boundary, never inside a user-perceived character (a letter and its accents, an
emoji sequence), and moves back to a word boundary when one is near.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..tokens.counter import ChunkAnalysis
from ..tokens.encoding import Encoding, first_boundary, last_boundary

if TYPE_CHECKING:
    import regex

__all__ = [
    "Copied",
    "PiecesSpan",
    "Span",
    "TextSpan",
    "grapheme_ceil",
    "grapheme_floor",
    "has_text",
    "spliced_lengths",
    "truncate_text",
]

# A stretch a text made from another copies: where it starts in the new text, where in the other,
# and its length in characters.
Copied = tuple[int, int, int]


# A user-perceived character (Unicode's extended grapheme cluster, by the regex module's \X): a
# cut between a letter and its accent, inside an emoji's ZWJ sequence or between a Thai
# consonant and its vowel sign changes the text that is sent (NFD "Café" became "Cafe").
@functools.cache
def _clusters() -> regex.Pattern[str]:
    """Grapheme clusters (``regex``'s ``\\X``), compiled at the first cut beyond ASCII: a command
    that never cuts such a text does not import ``regex`` (20 ms of a process's start)."""
    import regex

    return regex.compile(r"\X", regex.DOTALL)


_CLUSTER_REACH = 16  # characters read either side of a cut to find its cluster (widened as needed)

_NON_BLANK = re.compile(r"\S")


def has_text(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds anything but whitespace (without slicing it)."""
    return _NON_BLANK.search(text, start, end) is not None


# A word boundary is preferred if it keeps at least this share of the token-level cut.
WORD_BOUNDARY_KEEP = 0.7


class TextSpan:
    """Where an item's text sits in an encoded chunk: the analysis and its byte range."""

    __slots__ = ("analysis", "byte_end", "byte_start")

    def __init__(self, analysis: ChunkAnalysis, byte_start: int, byte_end: int) -> None:
        self.analysis = analysis
        self.byte_start = byte_start
        self.byte_end = byte_end

    @property
    def tokens(self) -> int:
        """Tokens that start inside the span."""
        return self.analysis.tokens_between(self.byte_start, self.byte_end)

    def prefix_tokens(self, prefix_bytes: int) -> int:
        """Tokens of the first ``prefix_bytes`` bytes of the span."""
        return self.analysis.tokens_between(self.byte_start, self.byte_start + prefix_bytes)

    def char_counter(self, text: str) -> Callable[[int, int], int]:
        """``count(a, b)``: tokens of ``text[a:b]``, ``text`` being the span's text, read from the
        encode it lies in (no new encode). Character offsets become byte offsets through
        checkpoints every 256 characters (:func:`_byte_offsets`).

        A count is the tokens that start before ``b`` less those that start before ``a``, each
        read once an offset: splitting a cut document into passages asks for each unit's end
        again and again (the 100,000-token document: 8,100 counts at 2,600 offsets)."""
        byte_of = _byte_offsets(text)
        starting_before, base = self.analysis.tokens_starting_before, self.byte_start
        read: dict[int, int] = {}

        def before(char: int) -> int:
            found = read.get(char)
            if found is None:
                found = read[char] = starting_before(base + byte_of(char))
            return found

        def count(start: int, end: int) -> int:
            return before(end) - before(start)

        return count


def _byte_offsets(text: str) -> Callable[[int], int]:
    """``byte_of(char)``: the UTF-8 byte offset of ``text``'s character ``char``, through
    checkpoints every 256 characters (built once), so any order of calls costs the same."""
    if text.isascii():
        return int
    step = 256
    checkpoints = [0]
    for start in range(0, len(text), step):
        checkpoints.append(checkpoints[-1] + len(text[start : start + step].encode("utf-8")))

    def byte_of(char: int) -> int:
        base = char // step
        return checkpoints[base] + len(text[base * step : char].encode("utf-8"))

    return byte_of


class PiecesSpan:
    """An item's text made of several pieces (a message's tool results or text blocks), each
    encoded on its own, read as one text: the pieces joined by a separator that costs nothing.
    Counts are exact per piece; ``bounds`` says where each piece sits in the joined text."""

    __slots__ = ("bounds", "pieces")

    def __init__(self, pieces: Sequence[tuple[str, TextSpan | None]], separator: str) -> None:
        self.pieces = tuple(span for _, span in pieces)
        bounds, start = [], 0
        for text, _ in pieces:
            bounds.append((start, start + len(text)))
            start += len(text) + len(separator)
        self.bounds = tuple(bounds)

    @property
    def tokens(self) -> int:
        """Tokens of all the pieces."""
        return sum(span.tokens for span in self.pieces if span is not None)

    def char_counter(self, text: str) -> Callable[[int, int], int]:
        """``count(a, b)``: tokens of the pieces' characters within ``text[a:b]``."""
        counters = [
            span.char_counter(text[a:b]) if span is not None else None
            for span, (a, b) in zip(self.pieces, self.bounds, strict=True)
        ]

        ends = [b for _, b in self.bounds]

        def count(start: int, end: int) -> int:  # only the pieces the range meets
            total, n = 0, bisect_right(ends, start)
            while n < len(ends) and self.bounds[n][0] < end:
                counter, (a, b) = counters[n], self.bounds[n]
                lo, hi = max(start, a), min(end, b)
                if counter is not None and lo < hi:
                    total += counter(lo - a, hi - a)
                n += 1
            return total

        return count


Span = TextSpan | PiecesSpan


def _chars_within(span: TextSpan, budget: int) -> int:
    """How many characters of the text the first ``budget`` tokens cover."""
    cut_byte = span.analysis.cut_after_tokens(span.byte_start, budget) - span.byte_start
    cut_byte = max(0, min(cut_byte, span.byte_end - span.byte_start))
    return span.analysis.chars_between(span.byte_start, span.byte_start + cut_byte)


def _best_sentence_cut(text: str, span: TextSpan, budget: int) -> int:
    """The last sentence end within the first ``budget`` tokens (found by scanning back)."""
    from .sentences import last_sentence_end  # its patterns compile in 5 ms: a count never cuts

    end = last_sentence_end(text, _chars_within(span, budget))
    while end and span.prefix_tokens(len(text[:end].encode("utf-8"))) > budget:
        end = last_sentence_end(text, end - 1)
    return end


def _token_cut(text: str, span: TextSpan, budget: int) -> int:
    chars = _chars_within(span, budget)
    space = max(text.rfind(" ", 0, chars), text.rfind("\n", 0, chars))
    if space > 0 and space >= WORD_BOUNDARY_KEEP * chars:
        return space
    return grapheme_floor(text, chars)


def _cluster_at(text: str, at: int) -> tuple[int, int] | None:
    """The grapheme cluster ``at`` falls inside (start < at < end), else None (``at`` is a
    boundary). ASCII characters side by side are two clusters (but CR LF)."""
    if at <= 0 or at >= len(text):
        return None
    before, after = text[at - 1], text[at]
    if before < "\x7f" and after < "\x7f" and before != "\r":
        return None
    if _RI_FIRST <= before <= _RI_LAST and _RI_FIRST <= after <= _RI_LAST:
        first = _ri_run_start(text, at)
        if at - 1 > first:  # past its run's first pair (whose cluster may hold a prefix before it)
            return _cluster_from(text, at - 1) if (at - first) % 2 else None  # in a flag, or between two
    reach = _CLUSTER_REACH
    while True:  # a window that cuts the cluster itself (200 accents on one letter) is widened
        start, stop = max(0, at - reach), min(len(text), at + reach)
        cluster = next(c for c in _clusters().finditer(text, start, stop) if c.end() > at)
        if (cluster.start() > start or start == 0) and (cluster.end() < stop or stop == len(text)):
            return (cluster.start(), cluster.end()) if cluster.start() < at else None
        reach *= 4


# Regional indicators pair into flags from the start of their run (UAX #29, GB12 and GB13), so
# ``regex``'s ``\X`` reads back to that start from wherever it is asked: each cut in a run of
# 80,000 flag letters read the whole run back, and a chat message of 160,000 of them took 14 s to
# fit (80,000: 4 s). A cut between two of them is told by where their run starts, found once a run
# and kept (:data:`_last_run`): the same fit took 0.16 s.
_RI_FIRST, _RI_LAST = "\U0001f1e6", "\U0001f1ff"
_RI_RUN_SOURCE = f"[{_RI_FIRST}-{_RI_LAST}]+"
_RI_RUN = re.compile(_RI_RUN_SOURCE)
# the text, the start and the end of the last run of regional indicators looked into (the text is
# held until a run of another is looked into)
_last_run: tuple[str, int, int] | None = None


@functools.cache
def _ri_run_back() -> regex.Pattern[str]:
    """A run of regional indicators matched backwards from where it ends (``regex``'s REVERSE)."""
    import regex

    return regex.compile(_RI_RUN_SOURCE, regex.REVERSE)


def _ri_run_start(text: str, at: int) -> int:
    """Where the run of regional indicators that holds ``text[at - 1]`` and ``text[at]`` starts
    (read once a run: :data:`_last_run`)."""
    global _last_run
    run = _last_run
    if run is None or run[0] is not text or not run[1] < at < run[2]:
        back, forth = _ri_run_back().match(text, 0, at), _RI_RUN.match(text, at)
        assert back is not None and forth is not None  # both characters are in the run
        run = _last_run = (text, back.start(), forth.end())
    return run[1]


def _cluster_from(text: str, start: int) -> tuple[int, int]:
    """The cluster that starts at ``start`` (a boundary): read from a slice, so that ``\\X`` sees
    nothing before it (the slice widened while it cuts the cluster)."""
    reach = _CLUSTER_REACH
    while True:
        stop = min(len(text), start + reach)
        length = len(_clusters().match(text[start:stop]).group())  # type: ignore[union-attr]
        if start + length < stop or stop == len(text):
            return start, start + length
        reach *= 4


def grapheme_floor(text: str, at: int) -> int:
    """``at``, or the start of the user-perceived character it would cut."""
    cluster = _cluster_at(text, at)
    return cluster[0] if cluster else at


def grapheme_ceil(text: str, at: int) -> int:
    """``at``, or the end of the user-perceived character it would cut."""
    cluster = _cluster_at(text, at)
    return cluster[1] if cluster else at


def truncate_text(text: str, span: TextSpan, budget: int) -> tuple[str, int]:
    """The longest prefix of ``text`` within ``budget`` tokens, and its token count.

    Ends on a sentence boundary when one fits; otherwise a token-level cut.
    """
    if budget <= 0 or not text:
        return "", 0
    if span.tokens <= budget:
        return text, span.tokens
    cut = _best_sentence_cut(text, span, budget) or _token_cut(text, span, budget)
    kept = text[:cut].rstrip()
    return kept, span.prefix_tokens(len(kept.encode("utf-8")))


def spliced_lengths(
    encoding: Encoding, made: str, copied: Sequence[Copied], source: str, span: TextSpan
) -> bytes | None:
    """The token lengths of ``made``, a text that copies the stretches ``copied`` of ``source``
    (the text ``span`` places in an encode), without encoding what it copies: a cut message keeps
    half of a 100,000-token document, and encoding the half again took 9.5 ms of a 49 ms fit.

    Inside each stretch, from its first hard boundary to its last (``tokens.encoding``: where the
    two proven encodings always end a token, told by the two characters around it, both inside
    the stretch here and so the same in both texts), the tokens are those ``span``'s encode has
    there; the text between those stretches (the markers where text was left out, and each
    stretch's ends) is encoded, at once. None, and ``made`` is encoded whole: an encoding
    without proven boundaries, a stretch that is not the source's text, or an encode whose
    tokens do not end at those boundaries."""
    byte_of = _byte_offsets(source)
    if not encoding.proven_boundaries or span.byte_end - span.byte_start != byte_of(len(source)):
        return None
    glue: list[str] = []
    inner: list[tuple[int, int]] = []  # the encode's token range of each stretch's inside
    at = 0  # where the text not yet placed starts in ``made``
    for start, origin, length in copied:
        if made[start : start + length] != source[origin : origin + length]:
            return None
        first = first_boundary(source, origin + 1)
        last = last_boundary(source, origin + length - 1, length)
        if first is None or last is None or not origin < first < last < origin + length:
            continue  # no inside between two boundaries: encoded with the text around it
        found = _tokens_at(span, byte_of(first), byte_of(last))
        if found is None or start + first - origin < at:  # stretches in order, apart
            return None
        glue.append(made[at : start + first - origin])
        inner.append(found)
        at = start + last - origin
    glue.append(made[at:])
    pieces = _glue_lengths(encoding, glue)
    lengths = span.analysis.lengths
    parts = [pieces[0]]
    for (low, high), piece in zip(inner, pieces[1:], strict=True):
        parts += [lengths[low:high], piece]
    return b"".join(parts)


def _tokens_at(span: TextSpan, first: int, last: int) -> tuple[int, int] | None:
    """The encode's tokens from byte ``first`` to byte ``last`` of the span's text (two hard
    boundaries), as a range of token indexes; None when no token starts or ends there."""
    analysis = span.analysis
    start, end = span.byte_start + first, span.byte_start + last
    low, high = analysis.tokens_starting_before(start), analysis.tokens_starting_before(end)
    if low >= high or analysis.token_end(high - 1) != end or (low and analysis.token_end(low - 1) != start):
        return None
    return low, high


def _glue_lengths(encoding: Encoding, texts: list[str]) -> list[bytes]:
    """Each text's token lengths: counted together where the encoding can (one call)."""
    together = getattr(encoding, "token_lengths_each", None)
    found = together(texts) if together is not None else None
    return [
        b"" if not text else lengths if lengths is not None else encoding.token_lengths(text)
        for text, lengths in zip(texts, found or [None] * len(texts), strict=True)
    ]
