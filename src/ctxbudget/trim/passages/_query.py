"""What a question asks about: its content words, and whether it asks for a summary."""

from __future__ import annotations

import re
from itertools import pairwise

from ...memo import per_fit
from ..bm25 import terms, words

__all__ = [
    "QUERY_STOPWORDS",
    "asks_about_the_document",
    "asks_for_summary",
    "content_query",
    "first_person_query",
    "quoted_query",
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
    return _content_words(query) or query


# A phrase a question puts in quotation marks on one line: straight, curly, German („...“), angled,
# Japanese; a straight quote after a Latin letter or a digit is no opening mark (13" and 15":
# inches), where Chinese and Japanese write one straight after a character ("什么是"最低采购量"?"). No
# phrase holds its own opening mark, so each search from an opening mark stops at the
# next one: a question of thousands of marks never closed (German prose read for curly quotes, whose
# “ closes) is read in linear time (it was quadratic: 8,000 of them in 308,000 characters, 22 s).
_QUOTED = re.compile(
    '(?<![A-Za-z0-9"])"([^"\\n]+)"(?![A-Za-z0-9])|\u201c([^\u201c\u201d\\n]+)\u201d|\u201e([^\u201e\u201c\u201d\\n]+)[\u201c\u201d]'
    "|\u00ab([^\u00ab\u00bb\\n]+)\u00bb|\u300c([^\u300c\u300d\\n]+)\u300d"
)


@per_fit
def quoted_query(query: str) -> str:
    """The content words of the phrases the question quotes ("" when it quotes none): what it
    quotes is its subject or the words it looks for ('Highlight the parts of this contract related
    to "Minimum Commitment" that should be reviewed by a lawyer. Details: Is there a minimum order
    size ...?'), where its other words may be a template's, shared with every question."""
    return _content_words(" ".join(part for found in _QUOTED.findall(query) for part in found))


def _content_words(text: str) -> str:
    """The words of ``text`` that are not function words or question framing, space-separated."""
    return " ".join(t for t in words(text) if t not in QUERY_STOPWORDS)


# The words a speaker names themselves by: in a question put to a log of the user's conversations
# ("Which laptop did I buy?") they say the answer is something the user said of themselves, in any
# of the forms ("My new Dell XPS 13 cost me ..."). Singular and plural apart: "we" is a household.
_FIRST_PERSON = (
    ("i", "me", "my", "mine", "myself"),
    ("we", "us", "our", "ours", "ourselves"),
)


@per_fit
def first_person_query(query: str) -> str:
    """Every form of each person (singular, plural) the question speaks in ("" when none): "Which
    laptop did I buy?" gives "i me my mine myself"."""
    said = set(terms(query))
    return " ".join(word for forms in _FIRST_PERSON if not said.isdisjoint(forms) for word in forms)


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
