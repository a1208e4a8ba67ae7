"""Selecting passages in prose: regions grown around the best passages, then context around them.

In prose (papers, manuals, contracts, articles) the evidence for a specific question is usually a
sentence or a paragraph, and the best matches lie apart: one window over the densest stretch
leaves most of them out. Here each of the best passages, strongest first, seeds a region that
grows to a neighbour while the neighbour keeps ``grow_share`` of the seed's relevance; seeds go
down to ``seed_floor`` of the best passage. What is left of the budget then goes to the passages
next to the regions, the most relevant first, so each answer is kept with its context.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from ._score import PassageWeights

__all__ = ["grown_regions"]


@dataclass
class _Pool:
    """The passages taken so far and the tokens left (a region costs ``region_cost`` on top)."""

    costs: Sequence[int]
    region_cost: int
    remaining: int
    taken: set[int]

    def take(self, first: int, last: int) -> None:
        """Take passages ``first..last``; a region next to one already taken joins it (no framing)."""
        joins = first - 1 in self.taken or last + 1 in self.taken
        self.remaining -= sum(self.costs[first : last + 1]) + (0 if joins else self.region_cost)
        self.taken.update(range(first, last + 1))


def grown_regions(
    relevance: Sequence[float],
    costs: Sequence[int],
    budget: int,
    region_cost: int,
    weights: PassageWeights,
    *,
    head: float = 0.0,
    alone: bool = False,
) -> list[tuple[int, int]]:
    """The passages within ``budget`` (each as a run of one, in order; adjacent runs merge into
    regions downstream): the first passage when it takes at most ``head`` of the budget, grown
    regions around the best passages, then context; with ``alone``, the passages best first, none
    grown and none too weak to take (a chat log's evidence is one turn, often worded apart from
    the question, so the most places are searched)."""
    pool = _Pool(costs, region_cost, budget, set())
    floor = 0.0 if alone else weights.seed_floor * max(relevance)
    if costs and costs[0] + region_cost <= head * budget:
        pool.take(0, 0)
    for seed in sorted(range(len(costs)), key=lambda i: (-relevance[i], i)):
        if relevance[seed] < floor or pool.remaining <= region_cost:
            break
        if seed not in pool.taken and costs[seed] + region_cost <= pool.remaining:
            pool.take(*((seed, seed) if alone else _grown(seed, relevance, pool, weights.grow_share)))
    _add_context(relevance, pool)
    return [(i, i) for i in sorted(pool.taken)]  # adjacent ones merge into regions downstream


def _grown(seed: int, relevance: Sequence[float], pool: _Pool, share: float) -> tuple[int, int]:
    """The region around ``seed``: a free neighbour joins (the more relevant side first) while its
    relevance is at least ``share`` of the seed's and the region still fits what is left."""
    first = last = seed
    cost = pool.costs[seed] + pool.region_cost
    bar = share * relevance[seed]
    while True:
        sides = [i for i in (first - 1, last + 1) if _free(i, pool) and relevance[i] >= bar]
        if not sides:
            return first, last
        step = max(sides, key=lambda i: (relevance[i], -i))
        if cost + pool.costs[step] > pool.remaining:
            return first, last
        cost += pool.costs[step]
        first, last = min(first, step), max(last, step)


def _add_context(relevance: Sequence[float], pool: _Pool) -> None:
    """Fill what is left with passages next to the regions, the most relevant first (ties: the
    earlier one). A heap of the free neighbours keeps this linear in the passages taken."""
    frontier = [(-relevance[i], i) for i in _neighbours(pool.taken, pool)]
    heapq.heapify(frontier)
    while frontier and pool.remaining > 0:
        _, index = heapq.heappop(frontier)
        if not _free(index, pool) or pool.costs[index] > pool.remaining:
            continue  # taken since, or too large now and later (what is left only shrinks)
        pool.take(index, index)
        for beside in (index - 1, index + 1):
            if _free(beside, pool):
                heapq.heappush(frontier, (-relevance[beside], beside))


def _neighbours(taken: set[int], pool: _Pool) -> set[int]:
    """The free passages next to taken ones."""
    return {i for t in taken for i in (t - 1, t + 1) if _free(i, pool)}


def _free(index: int, pool: _Pool) -> bool:
    """Whether ``index`` is a passage not taken yet."""
    return 0 <= index < len(pool.costs) and index not in pool.taken
