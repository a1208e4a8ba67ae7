"""Splitting over-long documents into their best passages, within the budget a fit has left.

Costs are read from the encode of the rendered prompt (the document's span in it), so splitting
tokenizes nothing again.
"""

from __future__ import annotations

from collections.abc import Callable

from ..items import JOINER_TOKENS, Decision, Item, ItemKey
from .bm25 import bm25_scores
from .passages import PassageScorer, passage_tokens, ranking, select_regions, split_passages
from .text import Span

__all__ = ["split_documents"]

MIN_PASSAGE_BUDGET = 32


def split_documents(
    dropped: list[Item],
    budget: int,
    query: str,
    *,
    cost: Callable[[Item], int],
    framing: Callable[[Item], int],
    span_of: Callable[[ItemKey], Span | None],
    scorer: PassageScorer | None = None,
) -> tuple[dict[int, tuple[tuple[int, int, str], ...]], dict[ItemKey, Decision]]:
    """Over-long documents that did not fit whole: their best passages, verbatim, in the budget left.

    Several such documents share that budget in proportion to their BM25 relevance to the query
    (equally when none matches), best first; what one leaves unused passes to the next.
    """
    slices: dict[int, tuple[tuple[int, int, str], ...]] = {}
    decisions: dict[ItemKey, Decision] = {}
    candidates = [d for d in dropped if span_of(d.key) is not None and cost(d) > budget]
    relevance = bm25_scores(query, [d.text for d in candidates])
    weights = relevance if any(relevance) else [1.0] * len(candidates)
    total = sum(weights) or 1.0
    ranked = sorted(zip(candidates, weights, strict=True), key=lambda pair: (-pair[1], pair[0].index))
    carry = 0
    for doc, weight in ranked:
        share = int(budget * weight / total) + carry
        span = span_of(doc.key)
        if span is None or share < MIN_PASSAGE_BUDGET:
            carry = share
            continue
        count = span.char_counter(doc.text)
        passages = split_passages(doc.text, count, passage_tokens(share))
        costs = [count(p.start, p.end) for p in passages]
        regions = select_regions(
            doc.text,
            passages,
            costs,
            share,
            query=query,
            region_cost=framing(doc) + JOINER_TOKENS,
            scorer=scorer,
        )
        used = sum(costs[i] for r in regions for i in r.passages) + len(regions) * (
            framing(doc) + JOINER_TOKENS
        )
        carry = share - used
        if not regions:
            continue
        slices[doc.index] = tuple((r.start, r.end, r.citation) for r in regions)
        cited = ", ".join(r.citation for r in regions[:4]) + (" ..." if len(regions) > 4 else "")
        decisions[doc.key] = Decision(
            "truncated",
            f"split into {len(passages)} passages; kept {len(regions)} verbatim region(s) ranked by "
            f"{ranking(scorer)} against the query: {cited}",
            tokens=used,
        )
    return slices, decisions
