"""What a question asks about: its content words, and whether it asks for a summary."""

from __future__ import annotations

from itertools import pairwise

from ..bm25 import terms
from ..memo import per_fit

__all__ = [
    "QUERY_STOPWORDS",
    "asks_about_the_document",
    "asks_for_summary",
    "content_query",
]

# Function words and the words questions are framed with: they say nothing about where the answer is.
QUERY_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "their",
        "they",
        "them",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "his",
        "her",
        "i",
        "me",
        "my",
        "do",
        "does",
        "did",
        "done",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "about",
        "into",
        "over",
        "under",
        "than",
        "then",
        "so",
        "if",
        "not",
        "no",
        "any",
        "all",
        "some",
        "more",
        "most",
        "other",
        "such",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "also",
        "very",
        "just",
        "only",
        "own",
        "same",
        "too",
        "s",
        "t",
        "summarize",
        "summarise",
        "summary",
        "discuss",
        "discussed",
        "discussion",
        "describe",
        "explain",
        "said",
        "say",
        "says",
        "tell",
        "talk",
        "talked",
        "think",
        "thought",
        "opinion",
        "mention",
        "mentioned",
        "give",
        "list",
        "briefly",
        "overall",
        "whole",
        # the framing of review requests ("Highlight the parts (if any) of this contract related to
        # ... that should be reviewed"): words that name the task, not where the answer is
        "highlight",
        "highlighted",
        "parts",
        "related",
        "relating",
        "regarding",
        "concerning",
        "reviewed",
        "please",
    ]
)


@per_fit
def content_query(query: str) -> str:
    """The query without function words and question framing (the query itself if nothing is left)."""
    kept = [t for t in terms(query) if t not in QUERY_STOPWORDS]
    return " ".join(kept) if kept else query


_SUMMARY_WORDS = frozenset(["summarize", "summarise", "summary", "summaries", "overview", "recap"])


def asks_for_summary(query: str) -> bool:
    """Whether the question asks for a summary or an overview (its evidence is a whole discussion)."""
    return not _SUMMARY_WORDS.isdisjoint(terms(query))


# Nouns a question names its own document by ("this contract", "the article"): what such a
# question asks is often on the first page (a contract's name, parties and date; a paper's authors).
_DOCUMENT_NOUNS = frozenset(
    ["contract", "agreement", "document", "article", "paper", "page", "report", "filing", "study"]
)
_TITLE_CHARS = 200


def asks_about_the_document(query: str, text: str) -> bool:
    """Whether the question is about the document as a whole, so that its head (a title and a
    lead, parties and a date, authors and an abstract) is likely to answer it: a content word of
    the question is in the document's first line (an encyclopedia page about what is asked), or
    the question names the document itself ("this contract", "the article")."""
    title = text.lstrip()[:_TITLE_CHARS].split("\n", 1)[0]
    return _names_the_document(query) or not _content_terms(query).isdisjoint(terms(title))


@per_fit
def _names_the_document(query: str) -> bool:
    """Whether the question names its document ("this contract", "the article"); remembered, as
    one question is asked of each document of its request."""
    return any(a in ("this", "the") and b in _DOCUMENT_NOUNS for a, b in pairwise(terms(query)))


@per_fit
def _content_terms(query: str) -> frozenset[str]:
    """The terms of :func:`content_query` (remembered, as :func:`_names_the_document`)."""
    return frozenset(terms(content_query(query)))
