"""Cutting a long chat message with the question in mind, not from the head.

A user message that carries context and a question keeps the question whole: the question is
the short paragraph near its end that asks (it has a ``?`` or a label such as ``Question:``) with
whatever instructions follow it, or, when the message opens with the question (``Question: ...``
then ``Context: ...``), its first paragraph; with no such paragraph, its last paragraph or last
sentence. From the rest, and from any other long message (a tool result), the passages that match
the question best are kept, verbatim, in their order, with a marker where text was left out. The
selection is the one ``split_documents`` uses for documents
(:func:`ctxbudget.trim.passages.select_regions`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from ..formats.base import GAP
from .passages import PassageScorer, passage_tokens, select_regions, split_passages
from .text import TextSpan

__all__ = ["GAP", "cut_message", "question_of", "question_spans"]

_SENTENCE_END = re.compile(r"[.!?:]\s+")
_PARAGRAPH = re.compile(r"\n\s*\n")
_ASKS = re.compile(r"\?|^\s*(question|query|q|task|ask)\s*[:.)-]", re.IGNORECASE)
_MAX_QUESTION_CHARS = 2000


def _paragraphs(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for gap in _PARAGRAPH.finditer(text):
        if text[start : gap.start()].strip():
            spans.append((start, gap.start()))
        start = gap.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


def question_spans(text: str) -> list[tuple[int, int]]:
    """The character ranges that hold the message's question (see the module docstring)."""
    paragraphs = _paragraphs(text)
    if not paragraphs:
        return []
    end = paragraphs[-1][1]
    tail = [p for p in paragraphs if end - p[0] <= _MAX_QUESTION_CHARS]
    asking = [p for p in tail if _ASKS.search(text[p[0] : p[1]])]
    if asking:
        return [(asking[0][0], end)]
    first = paragraphs[0]
    if (
        len(paragraphs) > 1
        and first[1] - first[0] <= _MAX_QUESTION_CHARS
        and _ASKS.search(text[first[0] : first[1]])
    ):
        return [first]
    if tail:
        return [(tail[-1][0], end)]
    starts = [m.end() for m in _SENTENCE_END.finditer(text, paragraphs[-1][0], max(0, end - 1))]
    if starts and end - starts[-1] <= _MAX_QUESTION_CHARS:
        return [(starts[-1], end)]
    return []  # no paragraph or sentence short enough to be the question


def question_of(text: str) -> str:
    """The question a message asks (its question paragraphs, joined)."""
    return " ".join(text[a:b].strip() for a, b in question_spans(text))


def cut_message(
    text: str,
    span: TextSpan,
    budget: int,
    query: str,
    *,
    count_text: Callable[[str], int],
    keep_question: bool,
    scorer: PassageScorer | None = None,
) -> str:
    """``text`` within about ``budget`` tokens: its question kept when ``keep_question``, then the
    passages that best match ``query`` (the question itself for the message that asks it)."""
    if budget <= 0:
        return ""
    if span.tokens <= budget:
        return text
    count = span.char_counter(text)
    gap = count_text(GAP)
    kept = question_spans(text) if keep_question else []
    kept_tokens = sum(count(a, b) for a, b in kept)
    if keep_question and (not kept or kept_tokens > budget):
        # no question to tell apart, or the question alone is too long: keep the end, where an ask is
        return _keep_end(text, kept[-1][0] if kept else 0, count, budget)
    if kept:
        query = " ".join(text[a:b] for a, b in kept) or query
    pieces = _select(text, _between(text, kept), budget - kept_tokens, query, count, gap, scorer)
    out = sorted([*((a, b, text[a:b]) for a, b in kept), *pieces])
    return _joined(text, out)


def _between(text: str, kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stretches of ``text`` outside the kept ranges."""
    stretches, start = [], 0
    for a, b in sorted(kept):
        if a > start:
            stretches.append((start, a))
        start = max(start, b)
    if start < len(text):
        stretches.append((start, len(text)))
    return [(a, b) for a, b in stretches if text[a:b].strip()]


def _select(
    text: str,
    stretches: list[tuple[int, int]],
    budget: int,
    query: str,
    count: Callable[[int, int], int],
    gap: int,
    scorer: PassageScorer | None,
) -> list[tuple[int, int, str]]:
    """The best passages within ``budget``, as (start, end, text) in ``text``, from the longest
    stretch outside the question (with the question at one end, the only one)."""
    if budget <= gap or not stretches:
        return []
    a, b = max(stretches, key=lambda s: s[1] - s[0])
    local = split_passages(text[a:b], lambda i, j: count(a + i, a + j), passage_tokens(budget))
    passages = [dataclasses.replace(p, start=p.start + a, end=p.end + a) for p in local]
    costs = [count(p.start, p.end) for p in passages]
    regions = select_regions(text, passages, costs, budget, query=query, region_cost=gap, scorer=scorer)
    return [(r.start, r.end, text[r.start : r.end].strip("\n")) for r in regions]


def _joined(text: str, pieces: list[tuple[int, int, str]]) -> str:
    """Pieces in order, a marker wherever text between or around them was left out."""
    out, last = "", 0
    for start, end, piece in pieces:
        if text[last:start].strip():
            out = out.rstrip("\n") + (GAP if out else GAP.lstrip("\n"))
        elif out:
            out += "\n\n"
        out += piece
        last = end
    if text[last:].strip():
        out = out.rstrip("\n") + GAP.rstrip("\n")
    return out


def _keep_end(text: str, start: int, count: Callable[[int, int], int], budget: int) -> str:
    """The longest end of ``text[start:]`` within ``budget`` tokens (a question ends with its ask)."""
    low, high = start, len(text)
    while low < high:
        mid = (low + high) // 2
        if count(mid, len(text)) <= budget - 1:
            high = mid
        else:
            low = mid + 1
    return "…" + text[low:] if low > 0 else text[low:]
