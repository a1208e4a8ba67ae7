"""Cutting a long chat message with the question in mind, not from the head.

A tool result or a user message that carries context and then a question keeps its question
(the last paragraph, or the last sentence) whole and, from the rest, the passages that match the
question best, verbatim, in their order, with a marker where text was left out. The selection is
the one ``split_documents`` uses for documents (:func:`ctxbudget.trim.passages.select_regions`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..formats.base import GAP
from .passages import PassageScorer, passage_tokens, select_regions, split_passages
from .text import TextSpan

__all__ = ["GAP", "cut_message", "question_of", "question_start"]

_SENTENCE_END = re.compile(r"[.!?:]\s+")
_MAX_QUESTION_CHARS = 2000


def question_start(text: str) -> int:
    """Where the message's question starts: its last paragraph when that is short, else its last
    sentence (0: the whole text)."""
    end = len(text.rstrip())
    paragraph = text.rfind("\n\n", 0, end)
    if paragraph != -1 and end - paragraph <= _MAX_QUESTION_CHARS:
        return paragraph + 2
    starts = [m.end() for m in _SENTENCE_END.finditer(text, 0, max(0, end - 1))]
    return starts[-1] if starts and end - starts[-1] <= _MAX_QUESTION_CHARS else 0


def question_of(text: str) -> str:
    """The question a message ends with (its last paragraph or sentence)."""
    return text[question_start(text) :].strip()


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
    """``text`` within about ``budget`` tokens: the question kept when ``keep_question``, then the
    passages that best match ``query`` (the question itself for the message that asks it)."""
    if budget <= 0:
        return ""
    if span.tokens <= budget:
        return text
    count = span.char_counter(text)
    gap = count_text(GAP)
    tail_at = question_start(text) if keep_question else len(text)
    tail = text[tail_at:]
    if keep_question:
        query = tail.strip() or query
        tail_tokens = count(tail_at, len(text))
        if tail_tokens + gap >= budget:  # the question alone is too long: keep its end
            return _keep_end(text, tail_at, count, budget)
        budget -= tail_tokens
    body = text[:tail_at]
    if not body.strip() or budget <= gap:
        return tail.lstrip() if keep_question else ""
    passages = split_passages(body, count, passage_tokens(budget))
    costs = [count(p.start, p.end) for p in passages]
    regions = select_regions(body, passages, costs, budget, query=query, region_cost=gap, scorer=scorer)
    pieces = [body[r.start : r.end].strip("\n") for r in regions]
    out = GAP.join(pieces)
    if regions and regions[0].start > 0:
        out = GAP.lstrip("\n") + out
    if not regions or regions[-1].end < len(body.rstrip()):
        out += GAP
    return out + tail.lstrip("\n") if tail else out.rstrip("\n")


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
