"""Okapi BM25 over the passages of one request.

A small own implementation: on this machine kind it gave the same top 10 as ``bm25s`` 0.3.16 on
100 queries and answered faster for in-request corpora, without bringing numpy and scipy
(../shared/notes/dependencies.md); ``rank-bm25`` is unmaintained.
"""

from __future__ import annotations

import math
import re
import string
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, chain
from typing import Any

from ..loaded import loaded_numpy
from ..memo import per_fit

__all__ = [
    "ascii_term_hits",
    "bm25_from_hits",
    "bm25_from_profile",
    "bm25_of_text",
    "bm25_scores",
    "bm25_span_scores",
    "query_terms",
    "repeats_itself",
    "span_word_counts",
    "term_profile",
    "terms",
    "word_mask",
    "words",
]

_WORD = re.compile(r"\w+", re.UNICODE)
# ASCII word characters (what ``\w`` matches in ASCII text) read as "a", everything else as " ":
# a word starts wherever " a" stands (or at the text's start).
_MASK = str.maketrans(
    {chr(c): "a" if chr(c) in string.ascii_letters + string.digits + "_" else " " for c in range(128)}
)
K1 = 1.5
B = 0.75
# More query terms than this are found by one pass over the text's words (:func:`ascii_term_hits`).
MANY_TERMS = 32


def repeats_itself(term: str) -> bool:
    """Whether ``term`` is its own head repeated ("aaaa", "hahaha": a period of at most half its
    length). A literal search stops wherever such a term matches, and inside a run of it (a
    form's "aaaa..." line) that is every place or every other, each checked back over the term's
    length (a 200-letter run against a 1.8 MB contract: 9 s): such a term is found by the pass
    over the words. Any other term's matches lie at least half its length apart."""
    return len(term) >= 4 and any(term[p:] == term[:-p] for p in range(1, len(term) // 2 + 1))


# Scripts written without spaces between words (Chinese, Japanese kana and kanji): a run of
# their characters is read as its character bigrams (one character alone as itself), the usual
# BM25 terms for such text, and each Han character of a longer run as itself too (Lucene's CJK
# bigrams with unigrams; not kana, whose single characters are particles: は, の, に). Read as one
# word, 东京的人口是多少 was a term no document held: every score was 0, and a document about the
# weather was kept before the one that answered; with bigrams alone, a word of one character
# (猫, 税, 法) matched only beside the same neighbour (猫吃 is not in 猫是, 猫に not in 猫は).
_UNSPACED = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]+"
)


def words(text: str) -> list[str]:
    """Lower-cased words (a run of unspaced script is one word here; :func:`terms` splits it)."""
    return _WORD.findall(text.lower())


def terms(text: str) -> list[str]:
    """Lower-cased word terms; a run of unspaced script (:data:`_UNSPACED`) as its bigrams."""
    found = words(text)
    if text.isascii() or _UNSPACED.search(text) is None:
        return found
    return [term for word in found for term in _unspaced_terms(word)]


def _unspaced_terms(word: str) -> list[str]:
    """``word``'s terms: its runs of unspaced script as their bigrams, the rest as it is."""
    out: list[str] = []
    at = 0
    for run in _UNSPACED.finditer(word):
        if run.start() > at:
            out.append(word[at : run.start()])
        chars = run.group()
        if len(chars) == 1:
            out.append(chars)
        else:
            for i, char in enumerate(chars):
                if char >= "\u3400" and not "\uff66" <= char <= "\uff9f":  # Han, not kana
                    out.append(char)
                if i + 1 < len(chars):
                    out.append(chars[i : i + 2])
        at = run.end()
    if at < len(word):
        out.append(word[at:])
    return out


def has_unspaced(text: str) -> bool:
    """Whether ``text`` holds a character of an unspaced script (its terms are not its words)."""
    return not text.isascii() and _UNSPACED.search(text) is not None


def word_mask(text: str) -> str:
    """ASCII ``text`` with word characters as "a" and every other character as " "."""
    return text.translate(_MASK)


def span_word_counts(mask: str, starts: Sequence[int], ends: Sequence[int]) -> list[int]:
    """Words in each span (from ``starts`` to ``ends``) of a :func:`word_mask`: word starts inside
    it, counted in C (an empty span holds none, even where a word starts)."""
    return [mask.count(" a", a, b) + (b > a and mask[a] == "a") for a, b in zip(starts, ends, strict=True)]


@per_fit
def query_terms(query: str) -> tuple[str, ...]:
    """The query's distinct terms in their first-seen order: a score sums over them in this order,
    so it is the same float in every process (a set's order of strings changes with the hash seed).
    Remembered for the fit (:mod:`ctxbudget.memo`): a request's question is scored against each of its
    documents in turn. A run of underscores is a form's blank, not a word: left out."""
    return tuple(dict.fromkeys(t for t in terms(query) if t.strip("_")))


@per_fit
def _ranks(wanted: tuple[str, ...]) -> Mapping[str, int]:
    """Each term's place in ``wanted`` (read only; remembered as :func:`query_terms` is)."""
    return {term: k for k, term in enumerate(wanted)}


def term_profile(passages: list[str]) -> tuple[list[Counter[str]], list[int]]:
    """Term frequencies and lengths of each passage (what scoring needs, reusable across queries)."""
    passage_terms = [terms(p) for p in passages]
    return [Counter(words) for words in passage_terms], [len(words) for words in passage_terms]


def bm25_from_profile(query: str, counts: list[Counter[str]], lengths: list[int]) -> list[float]:
    """BM25 scores from a precomputed :func:`term_profile`."""
    wanted = query_terms(query)
    if not counts or not wanted:
        return [0.0] * len(counts)
    average = sum(lengths) / len(lengths) or 1.0
    n = len(counts)
    rank = _ranks(tuple(wanted))
    held = [_held(c, wanted, rank) for c in counts]
    df = Counter(term for terms_ in held for term in terms_)
    idf = _idf(df, n)
    scores = []
    for c, length, terms_ in zip(counts, lengths, held, strict=True):
        norm = K1 * (1 - B + B * length / average)
        scores.append(_added(_share(idf[t], c[t], norm) for t in terms_))
    return scores


def _share(idf: Any, tf: Any, norm: Any) -> Any:
    """A term's share of a passage's score, from its IDF, its count there and the passage's
    length norm: floats, or numpy arrays of them (the same operations, so the same floats)."""
    return idf * tf * (K1 + 1) / (tf + norm)


def _added(shares: Iterable[float]) -> float:
    """The shares added one after another from the first, as numpy's reading adds them: ``sum``
    of floats is compensated from Python 3.12 on, and its last bit then differed (the ranking of
    a compaction would have hung on the interpreter and on whether numpy was loaded)."""
    total = 0.0
    for share in shares:
        total += share
    return total


def _idf(df: Mapping[str, int], n: int) -> dict[str, float]:
    """The IDF of each term some passage holds (a term none holds adds to no score: a question of
    10,000 words computed 10,000 logarithms a document for the few it shares with each)."""
    return {term: math.log((n - k + 0.5) / (k + 0.5) + 1.0) for term, k in df.items()}


def _held(counts: Mapping[str, int], wanted: Sequence[str], rank: Mapping[str, int]) -> list[str]:
    """The terms of ``wanted`` that ``counts`` holds, in ``wanted``'s order (a score sums in that
    order, so its float is the same whichever way they are found), read from the shorter side:
    every term for every passage was quadratic for a question of thousands of words."""
    if len(wanted) <= len(counts):
        return [t for t in wanted if t in counts]
    return sorted((t for t in counts if t in rank), key=rank.__getitem__)


def bm25_from_hits(
    wanted: Sequence[str], hits: Mapping[int, Mapping[str, int]], lengths: Sequence[int]
) -> list[float]:
    """The scores :func:`bm25_from_profile` gives, from only the passages that hold a query term
    (``hits``: passage index -> its count of each query term it holds) and every passage's length.
    The same operations in the same order (the terms in ``wanted``'s order: give :func:`query_terms`), so the same
    floats; a passage with no query term scores 0."""
    n = len(lengths)
    scores = [0.0] * n
    if not n or not wanted:
        return scores
    average = sum(lengths) / n or 1.0
    # Document frequencies counted in one pass over the hits, and each passage's sum over its own
    # terms in ``wanted``'s order: walking every term for every passage was quadratic when both
    # grow (a question of thousands of words over a long document).
    df = Counter(term for c in hits.values() for term in c)
    idf = _idf(df, n)
    rank = _ranks(tuple(wanted))
    for i, c in hits.items():
        norm = K1 * (1 - B + B * lengths[i] / average)
        # most passages hold one term: its share is the sum, 0.0 + x being x (the legal example's
        # 962 sentences with a hit: 1.24 -> 0.51 ms)
        if len(c) == 1:
            ((term, tf),) = c.items()
            scores[i] = _share(idf[term], tf, norm) if term in rank else 0.0
        else:
            scores[i] = _added(_share(idf[t], c[t], norm) for t in _held(c, wanted, rank))
    return scores


def bm25_scores(query: str, passages: list[str]) -> list[float]:
    """BM25 score of each passage against ``query`` (0 for passages sharing no term).

    ASCII passages (the common case) are read in C (:func:`bm25_span_scores` over the passages
    joined by spaces), so no counter of every word is built. Measured on the 520 passages of a
    100,000-token message: 6 ms instead of 25 ms. Other text takes :func:`term_profile`. Both
    give the same floats (property test)."""
    if not passages:
        return []
    starts = list(accumulate((len(p) + 1 for p in passages[:-1]), initial=0))
    spans = [(start, start + len(p)) for start, p in zip(starts, passages, strict=True)]
    return bm25_span_scores(query, " ".join(passages), spans)


def bm25_span_scores(query: str, text: str, spans: Sequence[tuple[int, int]]) -> list[float]:
    """BM25 of each span ``text[a:b]`` against ``query``, as :func:`bm25_scores` of the slices
    gives it; the spans are in order and do not overlap (what lies between them is ignored).

    The lengths are word starts counted in a mask of the text, and the query's terms are found as
    whole words in its lower-cased copy (:func:`ascii_term_hits`): no slice of the text, no
    counter of every word, at most one copy of ASCII text held at a time (text beyond ASCII:
    :func:`_lowered_in_step`)."""
    if not spans:
        return []
    wanted = query_terms(query)
    if not wanted:
        return [0.0] * len(spans)
    if text.isascii():
        mask, lowered = word_mask(text), None
    elif has_unspaced(text):  # its terms are bigrams, not the words a mask finds
        return bm25_from_profile(query, *term_profile([text[a:b] for a, b in spans]))
    else:
        lowered = _lowered_in_step(text)
        mask = _wide_mask(lowered) if lowered is not None else ""
    if not mask or _cuts_a_word(mask, spans):  # a word's pieces are words of their spans
        return bm25_from_profile(query, *term_profile([text[a:b] for a, b in spans]))
    starts, ends = [a for a, _ in spans], [b for _, b in spans]
    lengths = span_word_counts(mask, starts, ends)
    del mask  # ASCII text: one copy held at a time (the mask, then the lower-cased copy)
    if lowered is None:
        numpy = loaded_numpy()
        if numpy is not None and len(wanted) <= MANY_TERMS and _in_order(starts, ends, len(text)):
            return _numpy_scores(numpy, text.lower(), wanted, starts, ends, lengths)  # hits at once
        return bm25_from_hits(wanted, ascii_term_hits(text.lower(), wanted, starts, ends), lengths)
    return bm25_from_hits(wanted, term_hits(lowered, wanted, starts, ends), lengths)


def _in_order(starts: Sequence[int], ends: Sequence[int], size: int) -> bool:
    """Whether the spans are in order, apart and inside the text, as :func:`bm25_span_scores` is
    told they are: read with numpy only then, so that spans that are not (a caller's mistake)
    score as the reading hit by hit scores them, whether numpy is loaded or not."""
    return (
        starts[0] >= 0
        and ends[-1] <= size
        and all(a <= b for a, b in zip(starts, ends, strict=True))
        and all(b <= a for b, a in zip(ends, starts[1:], strict=False))
    )


def _cuts_a_word(mask: str, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether a span of the :func:`word_mask` ``mask`` starts or ends inside a word."""
    return any(mask[i - 1 : i + 1] == "aa" for span in spans for i in span if i > 0)


# Text beyond ASCII read as ASCII of the same length: each word character outside ASCII (what
# ``\w`` matches: a letter or a digit of any script) as "a", any other as " ", in two passes in C.
# A text with one curly quote or dash used to build a counter of every word of every passage:
# for the 386 passages of a 309 kB chat log (1,383 characters beyond ASCII), 18 ms against 8 ms.
_WIDE_WORD_CHAR = re.compile(r"[^\x00-\x7f](?<=\w)")
_WIDE_CHAR = re.compile(r"[^\x00-\x7f]")
_CAPITAL_SIGMA = "\u03a3"  # lower-cased by what follows it (a word's end or not): not per character
# The substitution costs a step per character beyond ASCII, the counters a step per word: past
# about a quarter of the characters the counters are faster (Cyrillic prose, 588 kB: 42.5 against
# 33.4 ms at 42%, 15.6 against 33.8 at 2%). Read from the text's head, so the probe stays cheap.
_WIDE_SHARE = 0.15
_SAMPLE_CHARS = 1 << 16


def _mostly_ascii(text: str) -> bool:
    """Whether at most :data:`_WIDE_SHARE` of the first characters of ``text`` are beyond ASCII."""
    sample = text[:_SAMPLE_CHARS]
    return len(sample) - len(sample.encode("ascii", "ignore")) <= _WIDE_SHARE * len(sample)


def _lowered_in_step(text: str) -> str | None:
    """The lower-cased copy of text beyond ASCII, to read as ASCII text is read, or None (then
    the counters read it): when most of it is beyond ASCII (:func:`_mostly_ascii`), or
    lower-casing is not one character for one (a capital sigma; a letter that lower-cases to two,
    as "İ" does), where the copy's offsets are not the text's."""
    if _CAPITAL_SIGMA in text or not _mostly_ascii(text):
        return None
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else None


def _wide_mask(lowered: str) -> str:
    """:func:`word_mask` of lower-cased text beyond ASCII (the same length)."""
    return _WIDE_CHAR.sub(" ", _WIDE_WORD_CHAR.sub("a", lowered)).translate(_MASK)


def ascii_term_hits(
    lowered: str, wanted: Sequence[str], starts: Sequence[int], ends: Sequence[int] | None = None
) -> dict[int, dict[str, int]]:
    """For each span holding a term of ``wanted`` as a whole word, its count of each such term.

    ``lowered`` is lower-cased ASCII text cut into spans starting at ``starts`` (ascending; a span
    never splits a word) and, when ``ends`` are given, ending there (a match between two spans
    counts for neither). Each term is searched as a literal first (in C), then checked to stand
    alone (no word character before or after it): a term with a character that cannot stand in
    ASCII text cannot match.

    Past :data:`MANY_TERMS` terms the text's words are read once instead, each looked up among
    the terms: a search per term costs a pass over the text each (about 0.36 ms per term over
    347 kB here, against 10-12 ms for one pass over its words, whatever the number of terms), and
    a question of thousands of words over a 2 MB document took 12 s. Same counts (property test)."""
    return term_hits(lowered, [term for term in wanted if term.isascii()], starts, ends)


def bm25_of_text(
    lowered: str, wanted: Sequence[str], starts: Sequence[int], lengths: Sequence[int]
) -> list[float]:
    """:func:`bm25_from_hits` of :func:`ascii_term_hits` (the spans of the lower-cased ASCII
    ``lowered`` starting at ``starts``; ``wanted`` distinct terms, as :func:`query_terms` gives),
    read with numpy when the process has loaded it (quicktok does): each term's hits counted per
    span by one ``searchsorted`` and ``bincount``, and its share of every score added at once
    (the legal example's 4,190 sentences against 6 terms: 2.4 -> 1.2 ms). Each score gets the
    same operations in the same order (its terms in ``wanted``'s order, :func:`_share` added by
    :func:`_added`), so the same floats (property test). Past :data:`MANY_TERMS` terms, read hit
    by hit: a pass over every span a term grew with both (100,000 sentences, 20,000 terms: 2.6 s
    against 1.2 s)."""
    numpy = loaded_numpy()
    if numpy is None or not lengths or not wanted or len(wanted) > MANY_TERMS:
        return bm25_from_hits(wanted, ascii_term_hits(lowered, wanted, starts), lengths)
    return _numpy_scores(numpy, lowered, wanted, starts, None, lengths)


def _numpy_scores(
    numpy: Any,
    lowered: str,
    wanted: Sequence[str],
    starts: Sequence[int],
    ends: Sequence[int] | None,
    lengths: Sequence[int],
) -> list[float]:
    """:func:`bm25_of_text`'s reading with numpy (``ends``: where each span ends, a term found
    past its span's end, between two spans, counting for none, as in :func:`ascii_term_hits`)."""
    n = len(lengths)
    average = sum(lengths) / n or 1.0
    norm = K1 * (1 - B + B * numpy.array(lengths, dtype=numpy.float64) / average)
    # each term's places as 8-byte integers, no int object kept a hit (a list of them took the
    # gateway's peak over a 1,000,000-token body from 4.54x its size to 4.76x)
    found: dict[str, array[int]] = {}
    searched, repeating = _searched_apart([term for term in wanted if term.isascii()])
    for term in searched:  # a term's places at once
        places = array("q", map(re.Match.start, _alone(term).finditer(lowered)))
        if places and term in found:  # a term given twice counts twice, as hit by hit
            found[term].extend(places)
        elif places:
            found[term] = places
    for term, at in _words_among(lowered, repeating) if repeating else ():
        found.setdefault(term, array("q")).append(at)
    bounds = numpy.array(starts, dtype=numpy.int64)
    limits = None if ends is None else numpy.array(ends, dtype=numpy.int64)
    counts: dict[str, Any] = {}
    for term, positions in found.items():
        places = numpy.frombuffer(positions, dtype=numpy.int64)
        spans = numpy.searchsorted(bounds, places, side="right") - 1
        inside = spans >= 0
        if limits is not None:
            inside &= places < limits[numpy.maximum(spans, 0)]
        counts[term] = numpy.bincount(spans[inside], minlength=n)
    idf = _idf({term: int(numpy.count_nonzero(c)) for term, c in counts.items() if c.any()}, n)
    scores = numpy.zeros(n)
    for term in wanted:
        if term in idf:
            held = counts[term] > 0
            tf = counts[term][held]
            scores[held] += _share(idf[term], tf, norm[held])
    return scores.tolist()  # type: ignore[no-any-return]


def _found(lowered: str, wanted: Sequence[str]) -> Iterable[tuple[str, int]]:
    """Each term of ``wanted`` where it stands alone in ``lowered``, and where (see
    :func:`ascii_term_hits`)."""
    if len(wanted) > MANY_TERMS:
        return _words_among(lowered, frozenset(wanted))
    searched, repeating = _searched_apart(wanted)
    if repeating:
        return chain(_each_term(lowered, searched), _words_among(lowered, repeating))
    return _each_term(lowered, wanted)


def _searched_apart(wanted: Sequence[str]) -> tuple[list[str], frozenset[str]]:
    """The terms of ``wanted`` searched as literals (in order, as given), and those found by the
    pass over the words instead (:func:`repeats_itself`)."""
    searched = [term for term in wanted if not repeats_itself(term)]
    return searched, frozenset(wanted) - set(searched)


def term_hits(
    lowered: str, wanted: Sequence[str], starts: Sequence[int], ends: Sequence[int] | None = None
) -> dict[int, dict[str, int]]:
    """:func:`ascii_term_hits` for lower-cased text of any script, every term searched."""
    out: dict[int, dict[str, int]] = {}
    for term, at in _found(lowered, wanted):
        span = bisect_right(starts, at) - 1
        if span < 0 or (ends is not None and at >= ends[span]):
            continue
        counts = out.setdefault(span, {})
        counts[term] = counts.get(term, 0) + 1
    return out


def _each_term(lowered: str, terms_: Sequence[str]) -> Iterator[tuple[str, int]]:
    """Where each term stands alone in ``lowered``, a literal search per term (in C)."""
    for term in terms_:
        for match in _alone(term).finditer(lowered):
            yield term, match.start()


def _alone(term: str) -> re.Pattern[str]:
    """``term`` where it stands alone: a literal search (``re`` keeps the compiled pattern)."""
    word = re.escape(term)
    return re.compile(rf"{word}(?<!\w{word})(?!\w)")


def _words_among(lowered: str, wanted: frozenset[str]) -> Iterator[tuple[str, int]]:
    """Where the words of ``lowered`` (maximal runs of word characters: each stands alone)
    that are among ``wanted`` start."""
    for match in _WORD.finditer(lowered):
        if (word := match.group()) in wanted:
            yield word, match.start()
