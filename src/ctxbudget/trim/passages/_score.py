"""Scoring passages: BM25 against the question's content words and the issue tags, plus small
configurable bonuses (neighbour continuity, protected tags) and, when one is given, a semantic
scorer's similarity (:class:`PassageScorer`)."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ...errors import ConfigError
from ..bm25 import bm25_span_scores
from ._passage import Passage, users_turns
from ._query import content_query, first_person_query, quoted_query

__all__ = ["PassageScorer", "PassageWeights", "passage_scores", "ranking"]


@dataclass(frozen=True, kw_only=True)
class PassageWeights:
    """Scoring bonuses (all configurable; BM25 stays the base score)."""

    neighbour: float = 0.3
    protected_tag: float = 1.0
    # Largest window as a share of the budget: several windows cover evidence in several places.
    window_share: float = 1.0
    # A window's passages near its edges count ``edge_weight`` (1.0: plain score mass), rising
    # to full weight over the outer ``edge_margin`` share of the window on each side.
    edge_weight: float = 0.5
    edge_margin: float = 0.25
    # A window loses this share of the score of each untaken passage just outside it: windows end
    # where relevance does, not in the middle of a relevant stretch.
    cut_penalty: float = 0.5
    # Relevance is raised to this power before a window sums it, so one strong match outweighs
    # many passages that share a common query word (1.0: plain sums; measured in docs/retention.md).
    sharpness: float = 2.0
    # Weight of a semantic scorer's similarity beside BM25 (both scaled to 0..1 first).
    semantic: float = 1.0
    # Hedging, for questions that do not ask for a summary: the selection is also made with a first
    # window of each of these shares of the budget (the rest going to the next best windows), and
    # it is taken when it keeps every strong passage (relevance at least ``strong`` of the best)
    # that the single window keeps, and more. () turns hedging off (measured in docs/retention.md).
    hedge_shares: tuple[float, ...] = (0.7, 0.5)
    strong: float = 0.7
    # For the same questions, a strong passage the windows leave out gets room from the windows'
    # weakest edges (False: windows alone; measured in docs/retention.md).
    rescue_strong: bool = True
    # In prose, for the same questions, regions grow around the best passages instead (True), a
    # neighbour joining while its relevance is at least ``grow_share`` of its region's seed, seeds
    # down to ``seed_floor`` of the best; what is left of the budget goes to context around them.
    prose_regions: bool = True
    grow_share: float = 0.3
    seed_floor: float = 0.2
    # In prose, for a question about the document as a whole (``asks_about_the_document``), its
    # first passage is kept first when it takes at most this share of the budget (0: never).
    head_share: float = 0.05
    # A passage that reads as a list of references (:func:`reads_as_references`) weighs this
    # share of its relevance: a bibliography names the page's subject in every line and is never
    # the evidence (1.0: as any passage; measured in bench/RETENTION_LOG.md).
    reference_list: float = 0.3
    # In a log of conversations with an assistant (:func:`~._passage.reads_as_chat_log`) the
    # evidence is something the user said of themselves once, often in other words than the
    # question's ("Which laptop did I buy?" for "My new Dell XPS 13 cost me $1,275"): the question's
    # first-person words count at this weight beside its content words, and passages are taken best
    # first, alone (no neighbour bonus, no growth, no seed floor). 0: content words only.
    first_person: float = 0.5
    # The content words of the phrases a question quotes (its subject: 'related to "Minimum
    # Commitment"') count again at this weight: they distinguish it from a template's words (0: no).
    quoted: float = 0.5


class PassageScorer(Protocol):
    """An optional semantic scorer: how close each passage is to the query, on any scale (higher
    is closer; cosine similarity of embeddings, say). It is added to BM25, which stays the base.
    ``ctxbudget.semantic`` ships one built on a small embedding model installed as an extra."""

    def __call__(self, query: str, passages: Sequence[str]) -> Sequence[float]: ...


def ranking(scorer: PassageScorer | None) -> str:
    """What passages are ranked by, for the reasons a report gives."""
    return "BM25 and semantic similarity" if scorer is not None else "BM25"


def passage_scores(
    text: str,
    passages: Sequence[Passage],
    query: str,
    protected_tags: Sequence[str],
    weights: PassageWeights,
    scorer: PassageScorer | None = None,
    *,
    chat_log: bool = False,
) -> list[float]:
    """Each passage's relevance to ``query``: BM25 scaled to the best passage (its quoted words
    again, :attr:`PassageWeights.quoted`), then the semantic scorer, the neighbour bonus (not in a
    ``chat_log``, where the question's first-person words count too:
    :attr:`PassageWeights.first_person`), reference lists and protected tags."""
    # read from the text in place: slicing every passage would copy the text (a million-token
    # message holds 4 MB of it)
    spans = [(p.start, p.end) for p in passages]
    scores = _to_unit(bm25_span_scores(content_query(query), text, spans))
    if weights.quoted and (quoted := quoted_query(query)):
        scores = _plus(scores, weights.quoted, bm25_span_scores(quoted, text, spans))
    if chat_log and weights.first_person and (own := first_person_query(query)):
        scores = _plus(scores, weights.first_person, bm25_span_scores(own, users_turns(text), spans))
    if scorer is not None:
        texts = [text[p.start : p.end] for p in passages]
        closeness = _above_median(_checked(scorer(query, texts), len(texts)))
        scores = _to_unit([s + weights.semantic * c for s, c in zip(scores, closeness, strict=True)])
    neighbour = 0.0 if chat_log else weights.neighbour
    smoothed = []
    for i, score in enumerate(scores):
        neighbours = [scores[j] for j in (i - 1, i + 1) if 0 <= j < len(scores)]
        smoothed.append(score + neighbour * (sum(neighbours) / len(neighbours) if neighbours else 0.0))
    if weights.reference_list != 1.0:
        for i, passage in enumerate(passages):
            if reads_as_references(text, passage.start, passage.end):
                smoothed[i] *= weights.reference_list
    tags = [tag.lower() for tag in protected_tags]
    for i, passage in enumerate(passages if tags else ()):
        piece = text[passage.start : passage.end].lower()
        if any(tag in piece for tag in tags):
            smoothed[i] += weights.protected_tag
    return smoothed


# What a line of a reference list holds. A DOI, an ISBN, a retrieval date or an arXiv id is one
# alone; "et al.", a year in parentheses, a page range or a volume are common elsewhere alone (a
# film and its year, a table's "(2023)", an Act's year, a paper's "et al."): two kinds of them.
_STRONG_WORDS = ("doi", "DOI", "ISBN", "Retrieved", "arXiv")
_STRONG_MARKS = re.compile(rf"\b(?:{'|'.join(_STRONG_WORDS)})\b")
# each weak mark with what it holds, looked for first with ``in`` (a search opening with ``\b``
# steps through every character of a line that holds none)
_WEAK_MARKS = (
    ("et al.", re.compile(r"\bet al\.")),
    ("(", re.compile(r"\((?:1[5-9]|20)\d\d[a-z]?\)")),
    ("pp.", re.compile(r"\bpp\.\s*\d")),
    ("ol.", re.compile(r"\b[Vv]ol\.\s*\d")),
)
_CITATION_LINE_CHARS = 300  # an entry is a line; prose that cites ("Irving et al. (2010) show") runs longer
_CITED_SHARE = 0.6


def reads_as_references(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is mostly lines of a reference list (two lines at least, short
    on average, three in five short and citing, :func:`_cites`): an encyclopedia
    page's references, a paper's bibliography. A paragraph that cites its sources is one long line,
    and a list of films and years, a table or an Act's clauses hold one kind: they stay what they
    are. Read in place first: prose is settled by its newlines alone (516 passages of 100,000
    tokens: the lines of each split and searched took 9 ms)."""
    breaks = text.count("\n", start, end)
    if breaks < 1 or end - start > _CITATION_LINE_CHARS * (breaks + 1):
        return False
    lines = [line for line in text[start:end].split("\n") if line.strip()]
    if len(lines) < 2:
        return False
    needed, could = _CITED_SHARE * len(lines), len(lines)  # lines that may still cite
    for line in lines:
        if len(line) > _CITATION_LINE_CHARS or not _cites(line):
            could -= 1
            if could < needed:  # settled: prose is, after two lines in five (500 passages: 2.9 -> 0.9 ms)
                return False
    return True


def _cites(line: str) -> bool:
    """Whether ``line`` holds a strong citation mark, or two kinds of weak ones."""
    if any(word in line for word in _STRONG_WORDS) and _STRONG_MARKS.search(line):
        return True
    return sum(1 for held, mark in _WEAK_MARKS if held in line and mark.search(line)) >= 2


def _plus(scores: Sequence[float], weight: float, more: Sequence[float]) -> list[float]:
    """``scores`` with ``more``, scaled to the best of it, added at ``weight``."""
    return [s + weight * m for s, m in zip(scores, _to_unit(more), strict=True)]


def _to_unit(scores: Sequence[float]) -> list[float]:
    """Scores divided by the best one (all 0 stay 0)."""
    top = max(scores, default=0.0) or 1.0
    return [s / top for s in scores]


def _above_median(values: Sequence[float]) -> list[float]:
    """How far each value stands above the document's median, 1 for the closest passage.

    Embedding similarities of unrelated passages are far from 0 (all-MiniLM-L6-v2 gives most
    passages of a meeting 0.1-0.3 against any question about it): only what stands out counts.
    """
    if not values:
        return []
    middle, top = statistics.median(values), max(values)
    span = top - middle
    return [max(0.0, (v - middle) / span) if span > 0 else 0.0 for v in values]


def _checked(values: Sequence[float], expected: int) -> list[float]:
    """The scorer's scores as floats, one a passage in order: a sequence of real numbers (a list,
    a tuple, an array), else a :class:`ConfigError`. A dict was read by its keys (0, 1, ...: the
    last passage scored best), and ``"0.9"`` or ``True`` passed as numbers."""
    try:
        if isinstance(values, str | bytes | Mapping | set | frozenset):  # characters, keys, no order
            raise TypeError("not a sequence of scores")
        out = [_real(v) for v in values]
    except (TypeError, ValueError, OverflowError) as exc:  # an int past float's range too
        raise ConfigError(
            f"the passage scorer must return one number per passage, got {type(values).__name__} {values!r:.60}"
        ) from exc
    if len(out) != expected:
        raise ConfigError(f"the passage scorer returned {len(out)} scores for {expected} passages")
    if not all(math.isfinite(v) for v in out):
        raise ConfigError("the passage scorer returned a score that is not a finite number")
    return out


def _real(value: object) -> float:
    """A score as a float: a number, or what stands for one (numpy's, a 0-d tensor's), not a
    truth value or a string of digits."""
    if isinstance(value, bool | str | bytes) or type(value).__name__ == "bool_":
        raise TypeError(f"a score is a number, got {type(value).__name__}")
    return float(value)  # type: ignore[arg-type]  # what float() refuses is a TypeError or ValueError
