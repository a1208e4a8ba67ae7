"""Query-aware passage selection from one long text, with exact offsets and citations.

Splitting keeps exact character offsets into the original: a transcript splits by speaker turn
(``Name: ...``) or Q/A line, a numbered record by its ``page:line`` lines, a contract by paragraph
or clause; units are grouped into passages of at most ``max_tokens`` (a unit over the cap is cut at
sentence ends). Each passage carries a citation (a ``page:line`` range when the text is numbered,
else its character range). Scoring is BM25 against the query and the issue tags, plus small
configurable bonuses (neighbour continuity, protected tags) and, when one is given, a semantic
scorer's similarity (:class:`PassageScorer`). Selection takes whole windows of
passages, best relevance first (passages near a window's edges weigh less, so evidence sits
inside with context on both sides), and returns verbatim slices in document order, adjacent
passages merged.

The package is split by idea: ``_passage`` (passages and citations), ``_query`` (what a question
asks about), ``_score`` (relevance) and ``_windows`` (the selection).
"""

from __future__ import annotations

from ._passage import (
    MIN_PASSAGE_TOKENS,
    PASSAGE_TOKENS,
    Passage,
    passage_tokens,
    reads_as_lines,
    split_passages,
    within_field,
)
from ._query import (
    QUERY_STOPWORDS,
    asks_about_the_document,
    asks_for_summary,
    content_query,
)
from ._score import PassageScorer, PassageWeights, ranking
from ._windows import Region, select_regions

__all__ = [
    "MIN_PASSAGE_TOKENS",
    "PASSAGE_TOKENS",
    "QUERY_STOPWORDS",
    "Passage",
    "PassageScorer",
    "PassageWeights",
    "Region",
    "asks_about_the_document",
    "asks_for_summary",
    "content_query",
    "passage_tokens",
    "ranking",
    "reads_as_lines",
    "select_regions",
    "split_passages",
    "within_field",
]
