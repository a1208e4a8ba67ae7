"""Choosing documents under a budget: rank, deduplicate, take greedily, skip what does not fit."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from ..items import Decision, Item
from .bm25 import bm25_scores

__all__ = ["DocumentSelection", "rank_documents", "select_documents"]

ScoreOrder = Literal["desc", "asc"]
OutputOrder = Literal["ranked", "original"]


@dataclass(frozen=True)
class DocumentSelection:
    """Decisions per document index, the output order of the kept ones, and the copies of a
    document ranked before them (dropped whatever the first copy's fate: never split either)."""

    decisions: Mapping[int, Decision]
    order: tuple[int, ...]
    duplicates: frozenset[int] = frozenset()


def rank_documents(docs: list[Item], query: str, score_order: ScoreOrder) -> tuple[list[Item], str]:
    """Documents best first: by ``score`` (unscored last), or by BM25 against the query."""
    if any(d.score is not None for d in docs):
        sign = -1.0 if score_order == "desc" else 1.0
        ranked = sorted(docs, key=lambda d: (d.score is None, sign * (d.score or 0.0), d.index))
        return ranked, f"score ({score_order})"
    if len(docs) < 2:  # one document is ranked first whatever its score: its text is not read
        return list(docs), "bm25 against the query"
    scores = dict(zip((d.index for d in docs), bm25_scores(query, [d.text for d in docs]), strict=True))
    ranked = sorted(docs, key=lambda d: (-scores[d.index], d.index))
    return ranked, "bm25 against the query"


def select_documents(
    docs: list[Item],
    costs: Mapping[int, int],
    budget: int,
    *,
    query: str,
    score_order: ScoreOrder = "desc",
    output_order: OutputOrder = "ranked",
    at_least: Mapping[int, int] | None = None,
    shown: Callable[[int], int] = int,
    counted: Callable[[int], bool] | None = None,
) -> DocumentSelection:
    """Greedy selection in rank order; a document that does not fit is skipped, not a stop.
    ``at_least`` (lower bounds of ``costs``) is read first: a document whose bound is over what is
    left is skipped without reading its cost (which may mean tokenizing it); ``counted`` says
    whether a document's bound is its count already (its reason then gives the count, not "at
    least" it). ``shown`` turns a count into the figure reasons give (the report's scaled tokens)."""
    ranked, ranking = rank_documents(docs, query, score_order)
    decisions: dict[int, Decision] = {}
    seen: set[str] = set()
    kept: list[Item] = []
    kept_texts: set[str] = set()
    duplicates: set[int] = set()
    remaining = budget
    for position, doc in enumerate(ranked, 1):
        if doc.text in seen:
            duplicates.add(doc.index)
            earlier = "already kept" if doc.text in kept_texts else "ranked before it"
            decisions[doc.index] = Decision("dropped", f"duplicate of a document {earlier}")
            continue
        seen.add(doc.text)
        if at_least is not None and (bound := at_least[doc.index]) > remaining:
            exact = counted is not None and counted(doc.index)
            decisions[doc.index] = Decision(
                "dropped",
                f"rank {position} by {ranking}; needs {'' if exact else 'at least '}{shown(bound)} tokens, "
                f"{shown(remaining)} left of {shown(budget)}",
            )
        elif (cost := costs[doc.index]) <= remaining:
            decisions[doc.index] = Decision("kept", f"rank {position} by {ranking}; fits")
            kept.append(doc)
            kept_texts.add(doc.text)
            remaining -= cost
        else:
            decisions[doc.index] = Decision(
                "dropped",
                f"rank {position} by {ranking}; needs {shown(cost)} tokens, {shown(remaining)} left of {shown(budget)}",
            )
    if output_order == "original":
        kept.sort(key=lambda d: d.index)
    return DocumentSelection(decisions, tuple(d.index for d in kept), frozenset(duplicates))
