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
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import ConfigError
from .bm25 import bm25_scores, terms
from .sentences import iter_sentence_ends

__all__ = [
    "Passage",
    "PassageScorer",
    "PassageWeights",
    "Region",
    "asks_for_summary",
    "passage_tokens",
    "ranking",
    "select_regions",
    "split_passages",
]

_SPEAKER = re.compile(r"^[^\s:][^\n:]{0,40}:\s", re.MULTILINE)
_PAGE_LINE = re.compile(r"^(\d{1,4}:\d{1,3})\s", re.MULTILINE)


@dataclass(frozen=True)
class Passage:
    """A slice ``text[start:end]`` of the original, with its citation."""

    start: int
    end: int
    citation: str


@dataclass(frozen=True)
class Region:
    """Consecutive selected passages merged: one verbatim slice and its citation."""

    start: int
    end: int
    citation: str
    passages: tuple[int, ...]


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
    # many passages that share a common query word (1.0: plain sums). QMSum, all 1,576 probes at
    # 4k/8k/16k: 66.5/86.0/97.9% plain, 68.5/86.5/98.2% squared (docs/retention.md).
    sharpness: float = 2.0
    # Weight of a semantic scorer's similarity beside BM25 (both scaled to 0..1 first).
    semantic: float = 1.0
    # Hedging, for questions that do not ask for a summary: the selection is also made with a first
    # window of each of these shares of the budget (the rest going to the next best windows), and
    # it is taken when it keeps every strong passage (relevance at least ``strong`` of the best)
    # that the single window keeps, and more. () turns hedging off. QMSum, all 1,576 probes at
    # 4k/8k/16k (dev harness): 68.3/86.5/98.2% -> 68.8/87.6/98.2% by default (docs/retention.md).
    hedge_shares: tuple[float, ...] = (0.7, 0.5)
    strong: float = 0.7


class PassageScorer(Protocol):
    """An optional semantic scorer: how close each passage is to the query, on any scale (higher
    is closer; cosine similarity of embeddings, say). It is added to BM25, which stays the base.
    ``ctxbudget.semantic`` ships one built on a small embedding model installed as an extra."""

    def __call__(self, query: str, passages: Sequence[str]) -> Sequence[float]: ...


def ranking(scorer: PassageScorer | None) -> str:
    """What passages are ranked by, for the reasons a report gives."""
    return "BM25 and semantic similarity" if scorer is not None else "BM25"


def _units(text: str) -> list[tuple[int, int]]:
    """Lines for transcripts and numbered records; paragraphs otherwise (exact offsets, newline kept)."""
    lines = text.splitlines(keepends=True)
    line_like = len(_SPEAKER.findall(text)) + len(_PAGE_LINE.findall(text)) > len(lines) * 0.3
    units: list[tuple[int, int]] = []
    position = 0
    if line_like:
        for line in lines:
            units.append((position, position + len(line)))
            position += len(line)
        return units
    for paragraph in re.split(r"(\n\s*\n)", text):
        if units and not paragraph.strip():
            units[-1] = (units[-1][0], units[-1][1] + len(paragraph))
        elif paragraph:
            units.append((position, position + len(paragraph)))
        position += len(paragraph)
    return units


def _cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """A unit over the cap, cut at sentence ends (or hard at the cap)."""
    pieces: list[tuple[int, int]] = []
    begin = start
    for stop in (*(start + e for e in iter_sentence_ends(text[start:end])), end):
        if stop - begin >= max_chars or stop == end:
            pieces.append((begin, stop))
            begin = stop
    if begin < end:
        pieces.append((begin, end))
    out: list[tuple[int, int]] = []
    for a, b in pieces:
        out += _hard_cut(text, a, b, max_chars) if b - a > 2 * max_chars else [(a, b)]
    return [(a, b) for a, b in out if b > a]


def _hard_cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """A stretch with no sentence end cut into pieces of at most ``max_chars``, each ending after
    a space in its last fifth when there is one (a kept passage then starts at a word)."""
    pieces: list[tuple[int, int]] = []
    begin = start
    while end - begin > max_chars:
        stop = begin + max_chars
        space = max(
            text.rfind(" ", stop - max_chars // 5, stop), text.rfind("\n", stop - max_chars // 5, stop)
        )
        cut = space + 1 if space > begin else stop
        pieces.append((begin, cut))
        begin = cut
    return [*pieces, (begin, end)]


def _citation(text: str, start: int, end: int) -> str:
    marks = _PAGE_LINE.findall(text[start:end])
    if marks:
        return marks[0] if len(marks) == 1 else f"{marks[0]}-{marks[-1]}"
    return f"chars {start}-{end}"


PASSAGE_TOKENS = 256


def passage_tokens(budget: int) -> int:
    """The passage size for a budget: 256 tokens, smaller when the budget is under four passages,
    so that a small budget still has windows it can hold (never under 32 tokens)."""
    return max(32, min(PASSAGE_TOKENS, budget // 4))


def split_passages(
    text: str, count: Callable[[int, int], int], max_tokens: int = PASSAGE_TOKENS
) -> list[Passage]:
    """Passages of ``text`` of at most about ``max_tokens`` (``count(start, end)`` gives tokens)."""
    max_chars = max(200, max_tokens * 4)
    units: list[tuple[int, int]] = []
    for start, end in _units(text):
        units += _cut(text, start, end, max_chars) if end - start > max_chars else [(start, end)]
    passages: list[Passage] = []
    begin = units[0][0] if units else 0
    for n, (_, end) in enumerate(units):
        last = n + 1 == len(units)
        if last or count(begin, units[n + 1][1]) > max_tokens:
            passages.append(Passage(begin, end, _citation(text, begin, end)))
            begin = end
    return passages


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
    ]
)


def content_query(query: str) -> str:
    """The query without function words and question framing (the query itself if nothing is left)."""
    kept = [t for t in terms(query) if t not in QUERY_STOPWORDS]
    return " ".join(kept) if kept else query


def _scores(
    text: str,
    passages: Sequence[Passage],
    query: str,
    protected_tags: Sequence[str],
    weights: PassageWeights,
    scorer: PassageScorer | None = None,
) -> list[float]:
    texts = [text[p.start : p.end] for p in passages]
    scores = _to_unit(bm25_scores(content_query(query), texts))
    if scorer is not None:
        closeness = _above_median(_checked(scorer(query, texts), len(texts)))
        scores = _to_unit([s + weights.semantic * c for s, c in zip(scores, closeness, strict=True)])
    smoothed = []
    for i, score in enumerate(scores):
        neighbours = [scores[j] for j in (i - 1, i + 1) if 0 <= j < len(scores)]
        smoothed.append(
            score + weights.neighbour * (sum(neighbours) / len(neighbours) if neighbours else 0.0)
        )
    for i, piece in enumerate(texts):
        if any(tag.lower() in piece.lower() for tag in protected_tags):
            smoothed[i] += weights.protected_tag
    return smoothed


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
    out = [float(v) for v in values]
    if len(out) != expected:
        raise ConfigError(f"the passage scorer returned {len(out)} scores for {expected} passages")
    if not all(math.isfinite(v) for v in out):
        raise ConfigError("the passage scorer returned a score that is not a finite number")
    return out


def _run_from(left: int, costs: Sequence[int], cap: int, taken: set[int]) -> tuple[int, int]:
    """The last passage and the cost of the longest run of untaken passages from ``left`` within
    ``cap`` (last is ``left - 1`` when not even the first fits)."""
    last, cost = left - 1, 0
    while last + 1 < len(costs) and last + 1 not in taken and cost + costs[last + 1] <= cap:
        last += 1
        cost += costs[last]
    return last, cost


def _head(costs: Sequence[int], cap: int) -> list[tuple[int, int]]:
    """The leading passages that fit ``cap``: with no relevance signal, keep the document's start
    (what head truncation keeps, whole passages only)."""
    last, _ = _run_from(0, costs, cap, set())
    return [(0, last)] if last >= 0 else []


def _best_window(
    scores: Sequence[float], costs: Sequence[int], cap: int, taken: set[int], weights: PassageWeights
) -> tuple[int, int] | None:
    """The run of untaken passages, as long as ``cap`` allows from its first passage, with the
    most edge-weighted score mass (ties: the earlier run).

    Plain score mass pushes the best passage against a window's edge whenever more relevance
    lies on one side of it, and evidence that continues past that edge is cut. Weighting
    passages near either edge down (``edge_weight`` at the edge, rising to 1 over the outer
    ``edge_margin`` of the window) keeps evidence inside with context on both sides, and
    ``cut_penalty`` of the score of each passage just outside counts against the window. On all
    1,576 QMSum probes these raised retention at 4k/8k/16k from 64.4/84.2/97.1% to
    66.4/86.0/97.9% (docs/retention.md).
    """
    best: tuple[float, int, int] | None = None
    for left in range(len(costs)):
        if left in taken:
            continue
        last, cost = _run_from(left, costs, cap, taken)
        if last < left:
            continue
        mass = _edge_weighted_mass(scores[left : last + 1], costs[left : last + 1], cost, weights)
        outside = (scores[left - 1] if left > 0 and left - 1 not in taken else 0.0) + (
            scores[last + 1] if last + 1 < len(scores) and last + 1 not in taken else 0.0
        )
        mass -= weights.cut_penalty * outside
        if best is None or mass > best[0] + 1e-12:
            best = (mass, left, last)
    return (best[1], best[2]) if best else None


def _edge_weighted_mass(
    scores: Sequence[float], costs: Sequence[int], total: int, weights: PassageWeights
) -> float:
    """Score mass of one window, each passage weighted by how far its middle is from an edge."""
    mass, position = 0.0, 0
    low, margin = weights.edge_weight, weights.edge_margin
    for score, cost in zip(scores, costs, strict=True):
        middle = (position + cost / 2) / (total or 1)
        nearness = min(1.0, min(middle, 1 - middle) / margin) if margin > 0 else 1.0
        mass += score * (low + (1 - low) * nearness)
        position += cost
    return mass


def select_regions(
    text: str,
    passages: Sequence[Passage],
    costs: Sequence[int],
    budget: int,
    *,
    query: str,
    protected_tags: Sequence[str] = (),
    weights: PassageWeights | None = None,
    region_cost: int = 0,
    scorer: PassageScorer | None = None,
) -> list[Region]:
    """Verbatim regions within ``budget`` tokens (``region_cost`` per region for its framing).

    Evidence is usually a contiguous stretch of discussion, and a quote survives only if all of it
    is kept, so selection takes whole windows: the contiguous run of passages with the most
    relevance (BM25 against the query and tags, plus ``scorer``'s similarity when one is given,
    with the bonuses; edge-weighted, see :func:`_best_window`) that fits the budget left, then
    the best run in what remains, and so on; regions come back in document order.

    A question that asks for a summary needs the whole discussion in one piece. The evidence for
    any other question is usually a short exchange, and when the strongest passages lie in more
    than one place a smaller first window that leaves room for a second may keep more of them:
    such selections (``weights.hedge_shares``) are tried too, and one is taken when it keeps every
    strong passage the single window keeps, and more.
    """
    weights = weights or PassageWeights()
    relevance = _scores(text, passages, query, protected_tags, weights, scorer)
    if not any(s > 0 for s in relevance):
        return _regions(text, passages, _head(costs, budget - region_cost))
    scores = [s**weights.sharpness + 1e-6 for s in relevance]  # ties favour coverage
    runs = _windows(scores, costs, budget, region_cost, weights, weights.window_share)
    if asks_for_summary(query) or not weights.hedge_shares:
        return _regions(text, passages, runs)
    top = max(relevance)
    strong = [i for i, r in enumerate(relevance) if r >= weights.strong * top]
    best, kept = runs, _held(strong, runs)
    for share in weights.hedge_shares:
        if len(kept) == len(strong):  # nothing left to gain
            break
        hedged = _windows(scores, costs, budget, region_cost, weights, share)
        if (held := _held(strong, hedged)) > kept:  # a strict superset: every one kept, and more
            best, kept = hedged, held
    return _regions(text, passages, best)


def _windows(
    scores: Sequence[float],
    costs: Sequence[int],
    budget: int,
    region_cost: int,
    weights: PassageWeights,
    share: float,
) -> list[tuple[int, int]]:
    """Windows taken best first: the first at most ``share`` of the budget (all of what is left
    when 1), later ones at most ``window_share`` of it, until nothing more fits."""
    taken: set[int] = set()
    runs: list[tuple[int, int]] = []
    remaining = budget
    while remaining - region_cost > 0:
        fraction = weights.window_share if runs else share
        cap = max(int(budget * fraction), 1) if fraction < 1 or runs else remaining
        window = _best_window(scores, costs, min(cap, remaining) - region_cost, taken, weights)
        if window is None:
            break
        first, last = window
        runs.append(window)
        taken.update(range(first, last + 1))
        remaining -= region_cost + sum(costs[first : last + 1])
    return runs


def _held(indices: Sequence[int], runs: Sequence[tuple[int, int]]) -> frozenset[int]:
    """Those of ``indices`` that the runs hold."""
    return frozenset(i for i in indices if any(first <= i <= last for first, last in runs))


_SUMMARY_WORDS = frozenset(["summarize", "summarise", "summary", "summaries", "overview", "recap"])


def asks_for_summary(query: str) -> bool:
    """Whether the question asks for a summary or an overview (its evidence is a whole discussion)."""
    return not _SUMMARY_WORDS.isdisjoint(terms(query))


def _regions(text: str, passages: Sequence[Passage], runs: list[tuple[int, int]]) -> list[Region]:
    """Runs of passages in document order, adjacent runs merged, as verbatim regions."""
    merged: list[list[int]] = []
    for first, last in sorted(runs):
        if merged and merged[-1][1] == first - 1:
            merged[-1][1] = last
        else:
            merged.append([first, last])
    return [
        Region(
            passages[a].start,
            passages[b].end,
            _citation(text, passages[a].start, passages[b].end),
            tuple(range(a, b + 1)),
        )
        for a, b in merged
    ]
