"""Sentence profiles: what extractive compaction needs from one text, whatever the query.

A profile holds a text's trimmed sentence spans, each sentence's token cost (read from one encode
of the text) and its length in BM25 terms. Term counts are read per query, and only for the
query's terms: a sentence's score needs nothing else, so a profile never builds a counter of
every word of every sentence (the most of a cold compaction's time on a 95k-token transcript).

For ASCII text (the common case) both lengths and counts come from C-level scans of the whole
text: lower-casing cannot change where ASCII words start or end, and sentence spans never split
a word, so a whole-word match in the lower-cased text is a term of exactly one sentence. Other
text is read one sentence at a time, as :func:`.bm25.terms` reads it (lower-casing may change
the length of non-ASCII text and depends on context, so offsets would not line up).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain
from typing import Any

from ..loaded import loaded_numpy
from ..tokens.counter import ChunkAnalysis, analyze
from ..tokens.registry import get_encoding
from ..weighed import WeighedLRU
from .bm25 import ascii_term_hits, span_word_counts, terms, word_mask
from .sentences import extends, sentence_ends
from .text import grapheme_ceil, grapheme_floor

__all__ = [
    "PROFILE_CHARS",
    "SentenceProfile",
    "SentenceReading",
    "clear_profile_cache",
    "read_ahead",
    "read_sentences",
    "reading",
    "sentence_bounds",
    "sentence_profile",
    "sentence_profiles",
    "sentence_spans",
]


_LEAD = re.compile(r"\s*")  # ``\s`` is ``str.isspace``, what ``strip`` strips


def sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Trimmed sentence spans of ``text``, as (start, end) pairs."""
    return tuple(zip(*sentence_bounds(text), strict=True))


def sentence_bounds(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The starts and the ends of :func:`sentence_spans`, as two tuples (a profile keeps them so:
    a pair a sentence was an object Python's cycle collector traversed, 4,190 of the legal
    example's 5,630 left by its cold assembly). A sentence's first visible character is found by
    one ``re`` match, not a slice and two strips (the legal example's 4k sentences: 2 ms -> 0.6 ms)."""
    lead = _LEAD.match
    starts: list[int] = []
    ends: list[int] = []
    start = 0
    wide = not text.isascii()  # ASCII has no mark to carry
    for end in sentence_ends(text):
        first = lead(text, start, end).end()  # type: ignore[union-attr]  # ``\s*`` always matches
        if wide and start < first < end and extends(text[first]):  # a mark on the blank before it
            first = grapheme_floor(text, first)  # the two are one character: the blank starts it
        if first < end:
            last = end
            while text[last - 1].isspace():  # a line's end kept its trailing blanks, a CRLF its CR
                last -= 1
            if last - first > LONG_SENTENCE_BYTES // 4:
                _cut_long(text, first, last, starts, ends)
            else:
                starts.append(first)
                ends.append(last)
        start = end
    if text[start:].strip():
        lead_chars = len(text[start:]) - len(text[start:].lstrip())
        _cut_long(text, _cluster_start(text, start, start + lead_chars), len(text.rstrip()), starts, ends)
    return tuple(starts), tuple(ends)


def _cluster_start(text: str, start: int, first: int) -> int:
    """``first`` (a sentence's first visible character), or the blank before it when the two are
    one user-perceived character (a mark or a joiner on a space): a sentence never starts inside
    one."""
    return grapheme_floor(text, first) if start < first < len(text) and extends(text[first]) else first


# A sentence longer than this many UTF-8 bytes is cut into pieces of about this size: a text with
# no sentence end (a table, OCR output, a log, unpunctuated Chinese) was one sentence, dropped
# whole from any compact budget below its cost. Bytes, not characters, track tokens across
# scripts: 2,000 bytes is some 450 tokens of English and 500-700 of Chinese (2,000 characters of
# Chinese were 1,500). Nearly every real sentence is shorter and stays whole.
LONG_SENTENCE_BYTES = 2_000
_LAST_GAP = re.compile(r"(.*\S)\s", re.DOTALL)  # greedy: the last blank after a visible character
_SPACES = re.compile(r"\s+")


def _over_long(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is over :data:`LONG_SENTENCE_BYTES` (a character is 1-4 bytes:
    only a span of between a quarter of that and that many characters is encoded to tell)."""
    chars = end - start
    if chars <= LONG_SENTENCE_BYTES // 4 or chars > LONG_SENTENCE_BYTES:
        return chars > LONG_SENTENCE_BYTES
    return len(text[start:end].encode("utf-8")) > LONG_SENTENCE_BYTES


def _cut_long(text: str, start: int, end: int, starts: list[int], ends: list[int]) -> None:
    """Append the trimmed span ``start:end``, cut where a piece would pass
    :data:`LONG_SENTENCE_BYTES`: at the last whitespace before that; with none, there in
    non-ASCII text (a run of unspaced script has no spaces; never inside a grapheme cluster, and
    a word of Latin letters there may be cut), at the first whitespace after it in ASCII text (a
    piece never splits an ASCII word: an ASCII profile's term scan relies on it)."""
    while _over_long(text, start, end):
        window = text[start : start + LONG_SENTENCE_BYTES]
        ascii_only = window.isascii()
        if not ascii_only:  # the characters of the window's first LONG_SENTENCE_BYTES bytes
            window = window.encode("utf-8")[:LONG_SENTENCE_BYTES].decode("utf-8", "ignore")
        limit = start + len(window)
        last = _LAST_GAP.match(text, start, limit)
        if last is not None:
            cut = last.end(1)
        elif not ascii_only:  # not inside a user-perceived character (an accent, an emoji's ZWJ)
            cut = grapheme_floor(text, limit)
            if cut <= start:  # one character over the size (200 accents on a letter): whole
                cut = grapheme_ceil(text, limit)
            if cut >= end:
                break
        else:
            gap = _SPACES.search(text, limit, end)
            if gap is None:
                break
            cut = gap.start()
        starts.append(start)
        ends.append(cut)
        start = _LEAD.match(text, cut, end).end()  # type: ignore[union-attr]  # always matches
    starts.append(start)
    ends.append(end)


@dataclass(frozen=True)
class SentenceReading:
    """What a text's profile reads from the text alone, whatever the encoding: its sentences
    (their starts and ends), their lengths in terms, and what reads the counts of a query's
    terms: the lower-cased text (ASCII), else each sentence's term counts."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    lengths: tuple[int, ...]
    lowered: str | None
    counts: tuple[Counter[str], ...] | None

    def hits(self, query_terms: set[str]) -> dict[int, dict[str, int]]:
        """For each sentence holding a query term, its count of each query term it holds."""
        if self.counts is not None:
            return {
                i: {t: c[t] for t in query_terms if t in c}
                for i, c in enumerate(self.counts)
                if any(t in c for t in query_terms)
            }
        assert self.lowered is not None
        return ascii_term_hits(self.lowered, list(query_terms), self.starts)


@dataclass(frozen=True)
class SentenceProfile(SentenceReading):
    """A text's reading and each sentence's raw token cost (tokens starting in it)."""

    costs: tuple[int, ...]


def _costs(analysis: ChunkAnalysis, starts: tuple[int, ...], ends: tuple[int, ...]) -> tuple[int, ...]:
    """Tokens starting in each sentence, from one encode of the text (a token belongs where it
    starts). An ASCII text's are counted in its start mask (:meth:`.ChunkAnalysis.start_mask`):
    its tokens' starts are then never Python ints (the legal example's 106 longest texts, 82k
    tokens, 4.9k sentences: 3.7 -> 2.9 ms, most of it the running sums), and while the text was
    only counted the mask is read from its ids, its lengths never gathered. A plug-in's lengths
    that hold a 0 (a token of no bytes has no mark) or do not sum to the text's size (a token
    over 255 bytes capped) are read by their running sums."""
    text = analysis.text
    ascii_only = analysis.size == len(text)
    if ascii_only:
        mask = analysis.start_mask()
        if mask is not None and len(mask) == analysis.size:
            marked = mask.count
            return tuple([marked(1, a, b) for a, b in zip(starts, ends, strict=True)])
    count = len(analysis.lengths)
    tokens = list(accumulate(analysis.lengths, initial=0))
    costs: list[int] = []
    char, byte = 0, 0  # walk forward so byte offsets cost one pass over the text
    for start, end in zip(starts, ends, strict=True):
        byte += start - char if ascii_only else len(text[char:start].encode("utf-8"))
        size = end - start if ascii_only else len(text[start:end].encode("utf-8"))
        costs.append(bisect_left(tokens, byte + size, 0, count) - bisect_left(tokens, byte, 0, count))
        char, byte = end, byte + size
    return tuple(costs)


def _costs_each(
    analyses: list[ChunkAnalysis], bounds: list[tuple[tuple[int, ...], tuple[int, ...]]]
) -> list[tuple[int, ...]]:
    """:func:`_costs` of each text; with numpy loaded (quicktok loads it), those of the ASCII
    texts read together: their tokens' starts as one running sum, each sentence's bounds looked
    up in it by ``searchsorted`` (the legal example's 105 pages, 4,190 sentences: 2.8 ms ->
    0.6 ms). A text's bounds are offset by the bytes of its tokens before it, and each lookup is
    held within the text's own tokens, as :func:`_costs`'s ``bisect_left(..., 0, count)`` is: a
    plug-in's lengths need not sum to its text's size (a token over 255 bytes is capped), and
    then the texts after it were costed from the wrong tokens. numpy is not imported here: a
    process that has not loaded it counts with :func:`_costs`."""
    numpy = loaded_numpy()
    costs: list[tuple[int, ...] | None] = [None] * len(analyses)
    wide = [i for i, a in enumerate(analyses) if numpy is None or a.size != len(a.text)]
    for i in wide:
        costs[i] = _costs(analyses[i], *bounds[i])
    narrow = [i for i in range(len(analyses)) if costs[i] is None]
    if narrow:
        assert numpy is not None
        lengths = numpy.frombuffer(b"".join(analyses[i].lengths for i in narrow), dtype=numpy.uint8)
        tokens = numpy.zeros(len(lengths) + 1, dtype=numpy.int64)
        numpy.cumsum(lengths, out=tokens[1:])
        sentences = [len(bounds[i][0]) for i in narrow]
        firsts = [0, *accumulate(len(analyses[i].lengths) for i in narrow)]
        bases = tokens[firsts[:-1]].tolist()
        lowers, uppers = (
            numpy.repeat(numpy.array(f, dtype=numpy.int64), sentences) for f in (firsts[:-1], firsts[1:])
        )

        def looked_up(side: int) -> Any:
            shifted = (map(base.__add__, bounds[i][side]) for i, base in zip(narrow, bases, strict=True))
            flat = numpy.fromiter(chain.from_iterable(shifted), dtype=numpy.int64, count=sum(sentences))
            return numpy.clip(numpy.searchsorted(tokens, flat), lowers, uppers)

        found = (looked_up(1) - looked_up(0)).tolist()
        at = 0
        for i, n in zip(narrow, sentences, strict=True):
            costs[i] = tuple(found[at : at + n])
            at += n
    return costs  # type: ignore[return-value]  # every one set above


# Characters of the texts profiled that are kept: about the count cache's 2M tokens of text,
# 30-80 MB of profiles (one text longer than this is kept alone).
PROFILE_CHARS = 8_000_000
_PROFILES: WeighedLRU[tuple[str, str], SentenceProfile] = WeighedLRU(
    PROFILE_CHARS, lambda key, _: len(key[1]) + 1
)


def sentence_profile(encoding_name: str, text: str) -> SentenceProfile:
    """The profile of ``text`` for ``encoding_name``; cached by content, so a transcript is
    profiled once per process (while it is among the last 8 million characters profiled)."""
    return sentence_profiles(encoding_name, [text])[0]


def sentence_profiles(encoding_name: str, texts: Sequence[str]) -> list[SentenceProfile]:
    """:func:`sentence_profile` of each text, those not cached made together (their sentence
    costs read at once: :func:`_costs_each`)."""
    found = [_PROFILES.get((encoding_name, t)) for t in texts]
    missing = list(dict.fromkeys(t for t, p in zip(texts, found, strict=True) if p is None))
    if missing:
        encoding = get_encoding(encoding_name)
        reads = [_READ.pop(t) or read_sentences(t) for t in missing]
        costs = _costs_each([analyze(encoding, t) for t in missing], [(r.starts, r.ends) for r in reads])
        made = {
            t: SentenceProfile(t, r.starts, r.ends, r.lengths, r.lowered, r.counts, c)
            for t, r, c in zip(missing, reads, costs, strict=True)
        }
        for text, profile in made.items():
            _PROFILES.put((encoding_name, text), profile)
        found = [p if p is not None else made[t] for t, p in zip(texts, found, strict=True)]
    return found  # type: ignore[return-value]  # every one found or made


def read_sentences(text: str) -> SentenceReading:
    """The reading of ``text`` (its profile but for the token costs)."""
    starts, ends = sentence_bounds(text)
    if text.isascii():
        lengths = tuple(span_word_counts(word_mask(text), starts, ends))
        return SentenceReading(text, starts, ends, lengths, text.lower(), None)
    counts = tuple(Counter(terms(text[a:b])) for a, b in zip(starts, ends, strict=True))
    return SentenceReading(text, starts, ends, tuple(sum(c.values()) for c in counts), None, counts)


# Texts read ahead (:func:`read_ahead`), until their profiles are made (then dropped from here).
_READ: WeighedLRU[str, SentenceReading] = WeighedLRU(PROFILE_CHARS // 4, lambda text, _: len(text) + 1)


def read_ahead(encoding_name: str, texts: Iterable[str], go_on: Callable[[], bool]) -> bool:
    """Read the sentences of ``texts`` that have no profile yet for ``encoding_name``, one text at
    a time while ``go_on()``; whether every text was read. What a profile needs that is not a
    token count, read while another thread counts (an assembly's compact tier, while its texts
    are counted ahead). Whatever is read here is what :func:`sentence_profiles` would read: only
    when it is read changes, and a text read here that is never profiled is forgotten among the
    last 2 million characters read."""
    for text in texts:
        if not go_on():
            return False
        if text and _PROFILES.get((encoding_name, text)) is None and _READ.get(text) is None:
            _READ.put(text, read_sentences(text))
    return True


def reading(encoding_name: str, text: str) -> SentenceReading | None:
    """The reading of ``text``, from its profile or from :func:`read_ahead` (None: neither)."""
    return _PROFILES.get((encoding_name, text)) or _READ.get(text)


def clear_profile_cache() -> None:
    """Forget cached sentence splits and profiles."""
    _PROFILES.clear()
    _READ.clear()
