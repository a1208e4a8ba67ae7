"""Deterministic extractive compaction: keep the sentences that matter most, verbatim, in order.

Sentences are scored by BM25 against the query and the issue tags (ties: earlier first); the
best are taken greedily while they fit the budget (a sentence that does not fit is skipped), and
the kept ones are returned in their original order, each an exact slice of its source. A source's
first kept sentence also pays the source's opening cost (what keeping any of it adds: the joiner
before it, an evidence item's wrapper), so many short sources share a small budget instead of each
having its opening reserved up front. No model
call, no paraphrase. Sentence costs come from one encode of each source text
(:mod:`.profile`), and a whole extraction is remembered by content: the next turn of a
conversation asks for the same transcript under the same question and budget again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat

from ..tokens.counter import TokenCounter
from ..tokens.registry import when_replaced
from ..weighed import WeighedLRU
from .bm25 import ascii_term_hits, bm25_from_hits, bm25_of_text, query_terms
from .profile import (
    PROFILE_CHARS,
    SentenceProfile,
    SentenceReading,
    clear_profile_cache,
    read_ahead,
    reading,
    sentence_profiles,
)

__all__ = ["Extract", "clear_sentence_cache", "extract_ahead", "extract_sentences"]

_MEMO_SIZE = 32  # extractions kept (a key holds its source texts, shared with the request)
# and at most this many characters of source texts (one extraction of more is kept alone): by
# entries alone, 32 compact tiers of distinct multi-megabyte transcripts were held for nothing
_MEMO_CHARS = 16_000_000


@dataclass(frozen=True)
class Extract:
    """Kept sentences per source (original order, joined by line breaks), how many of each
    source's were kept (a sentence may hold line breaks of its own), and the raw tokens they cost."""

    texts: tuple[str, ...]
    tokens: int
    sentences_kept: int
    sentences_total: int
    kept_each: tuple[int, ...]


_MemoKey = tuple[str, tuple[str, ...], int, str, tuple[int, ...]]


def _chars(key: _MemoKey, _: Extract) -> int:
    return sum(map(len, key[1])) + len(key[3])


_MEMO: WeighedLRU[_MemoKey, Extract] = WeighedLRU(_MEMO_CHARS, _chars, _MEMO_SIZE)
_EMPTY = SentenceProfile("", (), (), (), "", None, ())
# BM25 scores made ahead (:func:`extract_ahead`), until the extraction that needs them takes them.
# They are taken by the same assembly, so a few are kept: one whose tier was not compacted (it fit
# whole) or whose assembly failed is not needed, and its key holds the tier's texts.
_SCORES: WeighedLRU[tuple[tuple[str, ...], str], list[float]] = WeighedLRU(
    PROFILE_CHARS // 4, lambda key, _: sum(map(len, key[0])) + len(key[1]), 4
)


def _ascii_text(profiles: Sequence[SentenceReading]) -> tuple[str, list[int], list[int]]:
    """The ASCII profiles' lower-cased texts joined by spaces, where each of their sentences starts
    in it, and each sentence's number across ``profiles``: one search per term over them all, not
    one per text and term (105 transcript pages: 4.6 ms -> 3.4-3.8 ms). A space stands where a
    text ends, so a term stands alone next to it exactly as at a text's edge, and a term holds
    no space."""
    lowered: list[str] = []
    starts: list[int] = []
    numbers: list[int] = []
    at = number = 0
    for profile in profiles:
        if profile.lowered is not None and profile.starts:
            lowered.append(profile.lowered)
            starts += map(at.__add__, profile.starts)
            numbers += range(number, number + len(profile.starts))
            at += len(profile.lowered) + 1
        number += len(profile.starts)
    return " ".join(lowered), starts, numbers


def _scores(profiles: Sequence[SentenceReading], query: str) -> list[float]:
    """BM25 of every sentence of ``profiles`` (in order) against ``query``. A score sums over
    ``wanted`` in its order, so the order the hits are found in does not change a float."""
    wanted = query_terms(query)
    lowered, starts, numbers = _ascii_text(profiles)
    lengths = [n for p in profiles for n in p.lengths]
    if len(numbers) == len(lengths):  # every sentence is in the ASCII text
        return bm25_of_text(lowered, wanted, starts, lengths)
    hits = {numbers[k]: counts for k, counts in ascii_term_hits(lowered, wanted, starts).items()}
    offset = 0
    for profile in profiles:
        if profile.lowered is None:
            hits.update((offset + i, c) for i, c in profile.hits(set(wanted)).items())
        offset += len(profile.starts)
    return bm25_from_hits(wanted, hits, lengths)


def _extract(
    texts: tuple[str, ...], budget: int, query: str, counter: TokenCounter, openings: tuple[int, ...]
) -> Extract:
    filled = tuple(t for t in texts if t)
    made = iter(sentence_profiles(counter.encoding_name, filled))
    profiles = [next(made) if t else _EMPTY for t in texts]
    starts = list(chain.from_iterable(p.starts for p in profiles))
    ends = list(chain.from_iterable(p.ends for p in profiles))
    costs = list(chain.from_iterable(p.costs for p in profiles))
    sources = list(chain.from_iterable(repeat(s, len(p.starts)) for s, p in enumerate(profiles)))
    negated = [-score for score in _SCORES.pop((filled, query)) or _scores(profiles, query)]
    # Best first, ties earlier first: a stable sort on the score alone keeps ties in index order.
    order = sorted(range(len(costs)), key=negated.__getitem__)
    chosen: list[int] = []
    used = 0
    opened = [False] * len(texts)
    for i in order:
        source = sources[i]
        cost = costs[i] + 1  # +1: the line break that joins kept sentences
        if not opened[source]:
            cost += openings[source]
        if used + cost <= budget:
            chosen.append(i)
            used += cost
            opened[source] = True
    kept: list[list[str]] = [[] for _ in texts]
    for i in sorted(chosen):
        kept[sources[i]].append(texts[sources[i]][starts[i] : ends[i]])
    return Extract(tuple("\n".join(k) for k in kept), used, len(chosen), len(costs), tuple(map(len, kept)))


def extract_sentences(
    texts: list[str],
    budget: int,
    query: str,
    counter: TokenCounter,
    openings: list[int] | None = None,
) -> Extract:
    """The best sentences of ``texts`` within ``budget`` raw tokens (remembered by content).
    ``openings``: each text's cost when any of its sentences is kept (none by default); the
    extract's ``tokens`` include those of the texts it keeps."""
    key = (counter.encoding_name, tuple(texts), budget, query, tuple(openings or [0] * len(texts)))
    found = _MEMO.get(key)
    if found is None:
        found = _extract(key[1], budget, query, counter, key[4])
        _MEMO.put(key, found)
    return found


def extract_ahead(encoding_name: str, texts: Sequence[str], query: str, go_on: Callable[[], bool]) -> None:
    """What an extraction from ``texts`` against ``query`` reads from the texts alone, made while
    ``go_on()``: each text's sentences (:func:`.profile.read_ahead`), then the BM25 of them all,
    kept until the extraction takes it. An assembly's compact tier does this while its texts
    are counted on another thread; the extraction is the one it would be, only made sooner."""
    filled = tuple(t for t in texts if t)
    if not read_ahead(encoding_name, filled, go_on) or not go_on() or _SCORES.get((filled, query)):
        return
    readings = [r for r in (reading(encoding_name, t) for t in filled) if r is not None]
    if len(readings) == len(filled):  # none pushed out of its cache meanwhile
        _SCORES.put((filled, query), _scores(readings, query))


def clear_sentence_cache() -> None:
    """Forget cached sentence splits, profiles and extractions (benchmarks time cold runs)."""
    clear_profile_cache()
    _MEMO.clear()
    _SCORES.clear()


when_replaced(clear_sentence_cache)
