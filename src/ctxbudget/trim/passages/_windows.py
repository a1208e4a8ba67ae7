"""Selecting passages: whole windows of passages, best relevance first (passages near a window's
edges weigh less, so evidence sits inside with context on both sides), returned as verbatim
regions in document order, adjacent passages merged."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from ._grown import grown_regions
from ._passage import Passage, citation_of, reads_as_chat_log, reads_as_lines
from ._query import asks_about_the_document, asks_for_summary
from ._score import PassageScorer, PassageWeights, passage_scores

__all__ = ["Region", "select_regions"]


@dataclass(frozen=True)
class Region:
    """Consecutive selected passages merged: one verbatim slice and its citation."""

    start: int
    end: int
    citation: str
    passages: tuple[int, ...]


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
    ``cut_penalty`` of the score of each passage just outside counts against the window (the
    measurements are in docs/retention.md). Each window's extent and mass are read from prefix
    sums (:class:`_Sums`), not walked.
    """
    sums, stops = _Sums(scores, costs), _next_taken(len(costs), taken)
    best: tuple[float, int, int] | None = None
    for left in range(len(costs)):
        if left in taken:
            continue
        last = sums.last_within(left, cap, stops[left])
        if last < left:
            continue
        mass = sums.weighted(left, last, weights)
        outside = (scores[left - 1] if left > 0 and left - 1 not in taken else 0.0) + (
            scores[last + 1] if last + 1 < len(scores) and last + 1 not in taken else 0.0
        )
        mass -= weights.cut_penalty * outside
        if best is None or mass > best[0] + 1e-12:
            best = (mass, left, last)
    return (best[1], best[2]) if best else None


def _next_taken(count: int, taken: set[int]) -> list[int]:
    """For each passage, the first taken one at or after it (``count`` when none is)."""
    stops, stop = [count] * count, count
    for i in range(count - 1, -1, -1):
        if i in taken:
            stop = i
        stops[i] = stop
    return stops


# A window of at most this many passages is weighed passage by passage (the floats of the plain
# definition, :func:`_edge_weighted_mass`); a longer one by the closed form over prefix sums.
# Walking every window was quadratic in a long document cut to a large budget (an 8 MB message
# for a 1M-token model: 16.7 s in the gateway); up to 64 passages it is at most 64 steps a window.
LONG_WINDOW = 64


class _Sums:
    """Prefix sums over the passages: each window's cost, extent and edge-weighted mass in
    logarithmic time."""

    def __init__(self, scores: Sequence[float], costs: Sequence[int]) -> None:
        self.scores, self.costs = scores, costs
        self.before = list(accumulate(costs, initial=0))  # tokens before each passage
        self.middles = [b + c / 2 for b, c in zip(self.before, costs, strict=False)]
        self.mass = list(accumulate(scores, initial=0.0))
        self.moment = list(
            accumulate((s * m for s, m in zip(scores, self.middles, strict=True)), initial=0.0)
        )

    def last_within(self, left: int, cap: int, stop: int) -> int:
        """The last passage of the longest run from ``left`` within ``cap`` that stops before
        ``stop`` (``left - 1`` when not even the first fits)."""
        end = bisect_right(self.before, self.before[left] + cap, left, stop + 1) - 1
        return max(left - 1, end - 1)

    def weighted(self, left: int, last: int, weights: PassageWeights) -> float:
        """:func:`_edge_weighted_mass` of passages ``left..last``: a passage whose middle lies
        within the ramp (``edge_margin`` of the window) from its nearer edge weighs
        ``edge_weight`` rising linearly to 1 with that distance; the rest weigh 1."""
        start, end = self.before[left], self.before[last + 1]
        total, margin = end - start, weights.edge_margin
        if last - left < LONG_WINDOW or total <= 0 or margin <= 0:
            window = slice(left, last + 1)
            return _edge_weighted_mass(self.scores[window], self.costs[window], total, weights)
        ramp, middle, drop = margin * total, start + total / 2, 1 - weights.edge_weight
        split = bisect_right(self.middles, middle, left, last + 1)  # the first right of the middle
        near_left = min(split, bisect_left(self.middles, start + ramp, left, last + 1))
        near_right = max(split, bisect_right(self.middles, end - ramp, left, last + 1))
        left_mass = self.mass[near_left] - self.mass[left]
        right_mass = self.mass[last + 1] - self.mass[near_right]
        distance = (self.moment[near_left] - self.moment[left] - start * left_mass) + (
            end * right_mass - (self.moment[last + 1] - self.moment[near_right])
        )  # each ramp passage's score times its middle's distance from its edge, summed
        whole = self.mass[last + 1] - self.mass[left]
        return whole - drop * (left_mass + right_mass) + drop * distance / ramp


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
    strong passage the single window keeps, and more; a strong passage still left out is given
    room from the windows' weakest edges (:func:`_with_strong`). In prose, where that evidence is
    a sentence or a paragraph rather than an exchange of lines, regions grow around the best
    passages instead (:func:`~._grown.grown_regions`), after the document's first passage when
    the question is about the document as a whole (``weights.head_share``). In a log of
    conversations with an assistant (:func:`~._passage.reads_as_chat_log`), whose evidence is one of
    the user's turns, the best passages are taken alone, best first, and the question's
    first-person words count (``weights.first_person``).
    """
    weights = weights or PassageWeights()
    prose = not reads_as_lines(text)
    chat_log = not prose and reads_as_chat_log(text)
    relevance = passage_scores(text, passages, query, protected_tags, weights, scorer, chat_log=chat_log)
    if not any(s > 0 for s in relevance):
        return _regions(text, passages, _head(costs, budget - region_cost))
    summary = asks_for_summary(query)
    if not summary and weights.prose_regions and (prose or chat_log):
        head = weights.head_share if asks_about_the_document(query, text) else 0.0
        grown = grown_regions(relevance, costs, budget, region_cost, weights, head=head, alone=chat_log)
        return _regions(text, passages, grown)
    scores = [s**weights.sharpness + 1e-6 for s in relevance]  # ties favour coverage
    runs = _windows(scores, costs, budget, region_cost, weights, weights.window_share)
    if summary:
        return _regions(text, passages, runs)
    best = _hedged(runs, relevance, scores, costs, budget, region_cost, weights)
    if weights.rescue_strong:
        best = _with_strong(best, relevance, costs, region_cost, weights.strong)
    return _regions(text, passages, best)


def _hedged(
    runs: list[tuple[int, int]],
    relevance: Sequence[float],
    scores: Sequence[float],
    costs: Sequence[int],
    budget: int,
    region_cost: int,
    weights: PassageWeights,
) -> list[tuple[int, int]]:
    """The single-window selection, or one made with a smaller first window
    (``weights.hedge_shares``) when that keeps every strong passage the single window keeps, and
    more."""
    top = max(relevance)
    strong = [i for i, r in enumerate(relevance) if r >= weights.strong * top]
    best, kept = runs, _held(strong, runs)
    for share in weights.hedge_shares:
        if len(kept) == len(strong):  # nothing left to gain
            break
        hedged = _windows(scores, costs, budget, region_cost, weights, share)
        if (held := _held(strong, hedged)) > kept:  # a strict superset: every one kept, and more
            best, kept = hedged, held
    return best


def _with_strong(
    runs: list[tuple[int, int]],
    relevance: Sequence[float],
    costs: Sequence[int],
    region_cost: int,
    strong: float,
) -> list[tuple[int, int]]:
    """The windows, with each strong passage they left out (relevance at least ``strong`` of the
    best, strongest first) given room by trimming the windows' weakest edge passages.

    Windows keep a contiguous stretch; evidence that is one sentence elsewhere (a manual's answer,
    a paper's finding) is a strong passage outside it. A window gives up only passages at its
    edges that are not strong themselves, and never its last one; a passage that cannot be given
    room ends the rescue.
    """
    top = max(relevance)
    spans = [[first, last] for first, last in runs]
    kept = {i for first, last in runs for i in range(first, last + 1)}
    for passage in sorted(range(len(relevance)), key=lambda i: (-relevance[i], i)):
        if relevance[passage] < strong * top:
            break
        if passage in kept:
            continue
        trimmed = _trimmed(spans, relevance, costs, costs[passage] + region_cost, strong * top)
        if trimmed is None:
            break
        spans = [*trimmed, [passage, passage]]
        kept = {i for first, last in spans for i in range(first, last + 1)}
    return [(first, last) for first, last in spans]


def _trimmed(
    spans: list[list[int]], relevance: Sequence[float], costs: Sequence[int], need: int, bar: float
) -> list[list[int]] | None:
    """``spans`` with ``need`` tokens freed from their weakest edges (passages below ``bar``, a
    window's last passage never), or None when that much cannot be freed."""
    spans = [list(s) for s in spans]
    freed = 0
    while freed < need:
        edges = [
            (relevance[s[side]], k, side)
            for k, s in enumerate(spans)
            for side in (0, 1)
            if s[0] < s[1] and relevance[s[side]] < bar
        ]
        if not edges:
            return None
        _, k, side = min(edges)
        freed += costs[spans[k][side]]
        spans[k][side] += 1 if side == 0 else -1
    return spans


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
            citation_of(text, passages[a].start, passages[b].end),
            tuple(range(a, b + 1)),
        )
        for a, b in merged
    ]
