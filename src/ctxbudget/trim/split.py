"""Splitting over-long documents into their best passages, within the budget a fit has left.

Costs are read from the encode of the rendered prompt (the document's span in it), so splitting
tokenizes nothing again.
"""

from __future__ import annotations

from collections.abc import Callable

from ..items import JOINER_TOKENS, Decision, Item, ItemKey
from .bm25 import bm25_scores
from .passages import PassageScorer, passage_tokens, ranking, select_regions, split_passages, within_field
from .text import Span

__all__ = ["split_documents"]

MIN_PASSAGE_BUDGET = 32


Slices = tuple[tuple[int, int, str], ...]


def split_documents(
    dropped: list[Item],
    budget: int,
    query: str,
    *,
    cost: Callable[[Item], int],
    framing: Callable[[Item], int],
    span_of: Callable[[ItemKey], Span | None],
    scorer: PassageScorer | None = None,
) -> tuple[dict[int, Slices], dict[ItemKey, Decision]]:
    """Over-long documents that did not fit whole: their best passages, verbatim, in the budget left.

    Several such documents share that budget in proportion to their BM25 relevance to the query
    (equally when none matches), best first; what one leaves unused passes to the next.
    """
    slices: dict[int, Slices] = {}
    decisions: dict[ItemKey, Decision] = {}
    candidates = [d for d in dropped if span_of(d.key) is not None and cost(d) > budget]
    carry = 0
    for doc, share in _shares(candidates, budget, query):
        share += carry
        span = span_of(doc.key)
        if span is None or share < MIN_PASSAGE_BUDGET:
            carry = share
            continue
        kept, decision, used = _best_passages(doc, span, share, query, framing(doc), scorer)
        carry = share - used
        if decision is not None:
            slices[doc.index] = kept
            decisions[doc.key] = decision
    return slices, decisions


def _shares(candidates: list[Item], budget: int, query: str) -> list[tuple[Item, int]]:
    """Each document's share of ``budget`` by its BM25 relevance to the query (equal when none
    matches), the most relevant first; a lone document takes the whole budget (its relevance is
    not read: a BM25 pass over a document of megabytes, whose share by it, ``budget * w / w``,
    was a token short in about 1 budget in 18 by float rounding)."""
    if len(candidates) == 1:
        return [(candidates[0], budget)]
    relevance = bm25_scores(query, [d.text for d in candidates])
    weights = relevance if any(relevance) else [1.0] * len(candidates)
    total = sum(weights) or 1.0
    ranked = sorted(zip(candidates, weights, strict=True), key=lambda pair: (-pair[1], pair[0].index))
    return [(doc, int(budget * weight / total)) for doc, weight in ranked]


def _best_passages(
    doc: Item, span: Span, share: int, query: str, framing: int, scorer: PassageScorer | None
) -> tuple[Slices, Decision | None, int]:
    """The document's best regions within ``share`` tokens (each costs its passages, the
    document's ``framing`` and a joiner): the regions, the decision (None when none is kept)
    and the tokens used."""
    count = span.char_counter(doc.text)
    passages = split_passages(doc.text, count, passage_tokens(share))
    costs = [count(p.start, p.end) for p in passages]
    region_cost = framing + JOINER_TOKENS
    regions = select_regions(
        doc.text, passages, costs, share, query=query, region_cost=region_cost, scorer=scorer
    )
    used = sum(costs[i] for r in regions for i in r.passages) + len(regions) * region_cost
    if not regions:
        return (), None, used
    citations = [within_field(r.citation, r.start, r.end, doc.offset) for r in regions]
    cited = ", ".join(citations[:4]) + (" ..." if len(regions) > 4 else "")
    decision = Decision(
        "truncated",
        f"split into {len(passages)} passages; kept {len(regions)} verbatim region(s) ranked by "
        f"{ranking(scorer)} against the query: {cited}",
        tokens=used,
    )
    return tuple((r.start, r.end, c) for r, c in zip(regions, citations, strict=True)), decision, used
