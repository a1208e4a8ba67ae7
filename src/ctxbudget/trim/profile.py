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
from dataclasses import dataclass
from itertools import accumulate

from ..tokens.counter import analyze
from ..tokens.registry import get_encoding
from ..weighed import WeighedLRU
from .bm25 import ascii_term_hits, span_word_counts, terms, word_mask
from .sentences import sentence_ends

__all__ = ["PROFILE_CHARS", "SentenceProfile", "clear_profile_cache", "sentence_profile", "sentence_spans"]


_LEAD = re.compile(r"\s*")  # ``\s`` is ``str.isspace``, what ``strip`` strips


def sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Trimmed sentence spans of ``text`` (kept in its cached profile: a transcript is split once
    per process). A sentence's first visible character is found by one ``re`` match, not a slice and two strips
    (the legal example's 4k sentences: 2 ms -> 0.6 ms)."""
    lead = _LEAD.match
    spans: list[tuple[int, int]] = []
    start = 0
    for end in sentence_ends(text):
        first = lead(text, start, end).end()  # type: ignore[union-attr]  # ``\s*`` always matches
        if first < end:
            spans.append((first, end))
        start = end
    if text[start:].strip():
        lead_chars = len(text[start:]) - len(text[start:].lstrip())
        spans.append((start + lead_chars, len(text.rstrip())))
    return tuple(spans)


@dataclass(frozen=True)
class SentenceProfile:
    """One text's sentence spans, their raw token costs and term lengths, and what reads the
    counts of a query's terms: the lower-cased text (ASCII), else each sentence's term counts."""

    text: str
    spans: tuple[tuple[int, int], ...]
    costs: tuple[int, ...]
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
        return ascii_term_hits(self.lowered, list(query_terms), [a for a, _ in self.spans])


def _costs(encoding_name: str, text: str, spans: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """Tokens starting in each span, from one encode of the text (a token belongs where it starts)."""
    analysis = analyze(get_encoding(encoding_name), text)
    count = len(analysis.lengths)
    starts = list(accumulate(analysis.lengths, initial=0))
    ascii_only = text.isascii()
    costs: list[int] = []
    char, byte = 0, 0  # walk forward so byte offsets cost one pass over the text
    for start, end in spans:
        byte += start - char if ascii_only else len(text[char:start].encode("utf-8"))
        size = end - start if ascii_only else len(text[start:end].encode("utf-8"))
        costs.append(bisect_left(starts, byte + size, 0, count) - bisect_left(starts, byte, 0, count))
        char, byte = end, byte + size
    return tuple(costs)


# Characters of the texts profiled that are kept: about the count cache's 2M tokens of text,
# 30-80 MB of profiles (one text longer than this is kept alone).
PROFILE_CHARS = 8_000_000
_PROFILES: WeighedLRU[tuple[str, str], SentenceProfile] = WeighedLRU(
    PROFILE_CHARS, lambda key, _: len(key[1]) + 1
)


def sentence_profile(encoding_name: str, text: str) -> SentenceProfile:
    """The profile of ``text`` for ``encoding_name``; cached by content, so a transcript is
    profiled once per process (while it is among the last 8 million characters profiled)."""
    key = (encoding_name, text)
    found = _PROFILES.get(key)
    if found is None:
        found = _profile(encoding_name, text)
        _PROFILES.put(key, found)
    return found


def _profile(encoding_name: str, text: str) -> SentenceProfile:
    spans = sentence_spans(text)
    costs = _costs(encoding_name, text, spans)
    if text.isascii():
        return SentenceProfile(
            text, spans, costs, tuple(span_word_counts(word_mask(text), spans)), text.lower(), None
        )
    counts = tuple(Counter(terms(text[a:b])) for a, b in spans)
    lengths = tuple(sum(c.values()) for c in counts)
    return SentenceProfile(text, spans, costs, lengths, None, counts)


def clear_profile_cache() -> None:
    """Forget cached sentence splits and profiles."""
    _PROFILES.clear()
