"""Deterministic extractive compaction: keep the sentences that matter most, verbatim, in order.

Sentences are scored by BM25 against the query and the issue tags (ties: earlier first); the
best are taken greedily while they fit the budget (a sentence that does not fit is skipped), and
the kept ones are returned in their original order, each an exact slice of its source. No model
call, no paraphrase. Sentence costs come from one encode of each source text.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from ..tokens.counter import TokenCounter, analyze
from ..tokens.registry import get_encoding
from .bm25 import bm25_from_profile, term_profile
from .sentences import iter_sentence_ends

__all__ = ["Extract", "clear_sentence_cache", "extract_sentences"]


@dataclass(frozen=True)
class Extract:
    """Kept sentences per source (original order), and the raw tokens they cost."""

    texts: tuple[str, ...]
    tokens: int
    sentences_kept: int
    sentences_total: int


@lru_cache(maxsize=4096)
def _sentences(text: str) -> tuple[tuple[int, int], ...]:
    """Trimmed sentence spans of ``text`` (content-cached: a transcript is split once per process)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for end in iter_sentence_ends(text):
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        if piece.strip():
            spans.append((start + lead, end))
        start = end
    if text[start:].strip():
        lead = len(text[start:]) - len(text[start:].lstrip())
        spans.append((start + lead, len(text.rstrip())))
    return tuple(spans)


@dataclass(frozen=True)
class _Profile:
    """Everything extraction needs from one source text, independent of the query."""

    spans: tuple[tuple[int, int], ...]
    costs: tuple[int, ...]
    counts: list[Counter[str]]
    lengths: list[int]


@lru_cache(maxsize=1024)
def _profile(encoding_name: str, text: str) -> _Profile:
    """Sentence spans, their token costs (from one encode of the text) and term counts; cached by
    content, so a transcript is profiled once per process."""
    analysis = analyze(get_encoding(encoding_name), text)
    spans = _sentences(text)
    ascii_only = text.isascii()
    costs: list[int] = []
    char, byte = 0, 0  # walk forward so byte offsets cost one pass over the text
    for start, end in spans:
        byte += start - char if ascii_only else len(text[char:start].encode("utf-8"))
        size = end - start if ascii_only else len(text[start:end].encode("utf-8"))
        costs.append(analysis.tokens_between(byte, byte + size))
        char, byte = end, byte + size
    counts, lengths = term_profile([text[a:b] for a, b in spans])
    return _Profile(spans, tuple(costs), counts, lengths)


def extract_sentences(texts: list[str], budget: int, query: str, counter: TokenCounter) -> Extract:
    """The best sentences of ``texts`` within ``budget`` raw tokens."""
    profiles = [_profile(counter.encoding_name, t) if t else _Profile((), (), [], []) for t in texts]
    candidates = [
        (s, a, b, cost) for s, p in enumerate(profiles) for (a, b), cost in zip(p.spans, p.costs, strict=True)
    ]
    counts = [c for p in profiles for c in p.counts]
    lengths = [n for p in profiles for n in p.lengths]
    scores = bm25_from_profile(query, counts, lengths)
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
    chosen: set[int] = set()
    used = 0
    for i in order:
        cost = candidates[i][3] + 1  # +1: the line break that joins kept sentences
        if used + cost <= budget:
            chosen.add(i)
            used += cost
    kept: list[list[str]] = [[] for _ in texts]
    for i in sorted(chosen):
        source, start, end, _ = candidates[i]
        kept[source].append(texts[source][start:end])
    return Extract(tuple("\n".join(k) for k in kept), used, len(chosen), len(candidates))


def clear_sentence_cache() -> None:
    """Forget cached sentence splits and profiles (benchmarks time cold runs)."""
    _sentences.cache_clear()
    _profile.cache_clear()
