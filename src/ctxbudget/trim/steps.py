"""Cutting a history in steps, so that what is kept stays the same from turn to turn.

A provider's prompt cache reads a request's prefix only when it is byte-identical to one it saw.
Dropping the oldest message whenever a conversation is over its budget moves that prefix every
turn, and every turn misses the cache. Cut in steps instead: when the history is over its budget,
cut it back to a low-water mark (a share of the budget, 2/3 by default) on whole turns, then hold
that cut (the same first message, the same placeholder, the same messages after it) for as long as
what follows it fits; only then cut again. The placeholder's text names the number of messages it
stands for, which changes only when the cut does.

The cut is given back by the caller on the next turn (the report's ``history_cut``: the history
index of the first message kept after the placeholder, and the sha256 of the messages before it);
it is held only where a unit begins and the messages before it are the same. A unit larger than
any cut's room (a tool result, a pasted document) opens the kept run cut down to the room left,
against the question asked then; the cut records both, and the turns that hold it cut it the same.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from ..items import Decision, HistoryCut, Item

__all__ = ["DEFAULT_LOW_WATER", "MIN_PART_TOKENS", "StepCut", "Steps", "cut_of", "step_cut", "step_decisions"]

DEFAULT_LOW_WATER = 2 / 3


@dataclass(frozen=True)
class Steps:
    """How a history is cut in steps: the share of its budget a new cut keeps, and where the
    previous turn's kept run began (None: no cut yet)."""

    low_water: float = DEFAULT_LOW_WATER
    previous: HistoryCut | None = None


@dataclass(frozen=True)
class StepCut:
    """A stepped cut: the first unit kept or not, and the unit where the kept run begins (with
    ``budget``, that unit is cut to so many tokens against ``query``)."""

    keep_first: bool
    start: int  # unit index: units[start:] are kept
    held: bool  # the previous turn's cut, held
    budget: int | None = None
    query: str | None = None


# A unit too large for any cut is kept, cut down, only where a cut leaves it this many tokens.
MIN_PART_TOKENS = 128


def step_cut(
    units: list[list[Item]], costs: list[int], budget: int, placeholder: int, steps: Steps, query: str = ""
) -> StepCut | None:
    """Where to cut ``units`` (each unit's cost in ``costs``) within ``budget``: the previous cut
    while it fits, else a new one at the low-water mark. When the newest unit a new cut would leave
    out is more than any cut keeps (a tool result, a pasted document), the cut keeps it, cut down
    to the room left against ``query`` (the question now), and later turns cut it the same. None
    when the newest unit itself is that large, or the room left is under :data:`MIN_PART_TOKENS`:
    the usual selection, which cuts that unit into the room left, applies."""
    if len(units) < 2:
        return None
    target = math.floor(budget * steps.low_water)
    # The first unit (often the task) is kept when it takes at most half of what a cut keeps: a
    # rule on its own size, so the decision does not flip from turn to turn.
    keep_first = costs[0] + placeholder <= target // 2
    held = _held(units, costs, budget, placeholder, steps.previous, keep_first)
    if held is not None:
        return held
    head = costs[0] + placeholder if keep_first else placeholder
    room, start = target - head, len(units)
    while start > 1 and costs[start - 1] <= room:
        start -= 1
        room -= costs[start]
    left_out = start - 1 if start > 1 or not keep_first else None  # the first unit may be kept
    if start == len(units):
        return None
    if left_out is not None and costs[left_out] > target - head:
        # The newest unit left out is more than any new cut keeps (a pasted document): whole units
        # would drop it for good, turn after turn (32 of 32,000 tokens were sent). Cut into the room
        # left by the usual selection on every turn, it moved the prefix every turn (the cache
        # missed 16,000 tokens a turn): it is cut once, here, and held.
        if room < MIN_PART_TOKENS:
            return None
        return StepCut(keep_first, left_out, False, room, query)
    return StepCut(keep_first, _turn_start(units, start), False)


def _held(
    units: list[list[Item]],
    costs: list[int],
    budget: int,
    placeholder: int,
    previous: HistoryCut | None,
    keep_first: bool,
) -> StepCut | None:
    """The previous turn's cut, while it begins at a unit of the same conversation and what it
    keeps fits ``budget`` (its first unit cut to the size it was cut to); None otherwise."""
    held = _held_unit(units, previous)
    if held is None or previous is None:
        return None
    # a held cut keeps the first unit as it did: the budget, and so the rule on the first unit's
    # size, may have moved with the rest of the request (a longer question), and the prefix with it
    first = keep_first if previous.first_kept is None else previous.first_kept
    kept = costs[held] if previous.budget is None else min(costs[held], previous.budget)
    if (costs[0] + placeholder if first else placeholder) + kept + sum(costs[held + 1 :]) > budget:
        return None
    return StepCut(first, held, True, previous.budget, previous.query)


def _held_unit(units: list[list[Item]], previous: HistoryCut | None) -> int | None:
    """The unit the previous cut began at (None: no cut, not a unit's first message, or other
    messages before it)."""
    if previous is None:
        return None
    for u in range(len(units)):  # the first unit too: a cut may keep it cut down
        if units[u][0].index == previous.index:
            return u if cut_of(units, u, budget=previous.budget).sha256 == previous.sha256 else None
    return None


def cut_of(
    units: list[list[Item]],
    start: int,
    first_kept: bool | None = None,
    budget: int | None = None,
    query: str | None = None,
) -> HistoryCut:
    """The cut that keeps ``units[start:]``: its first message and the digest of those before
    (and whether the first unit is kept before the placeholder; with ``budget``, the tokens
    ``units[start]`` is cut to, against ``query``, and the digest covers that unit too: a cut
    from the first message on covered no message, and any conversation held it, its document
    cut against another's question)."""
    digest = hashlib.sha256()
    for unit in units[: start + 1 if budget is not None else start]:
        for m in unit:
            digest.update(json.dumps([m.role, m.text], ensure_ascii=False).encode("utf-8"))
    return HistoryCut(units[start][0].index, digest.hexdigest(), first_kept, budget, query)


def _turn_start(units: list[list[Item]], start: int) -> int:
    """``start``, moved forward to the first unit that opens a user turn (the newest unit at most):
    the kept run then begins with a question, as a conversation does."""
    for u in range(start, len(units) - 1):
        if units[u][0].role in ("user", "human"):
            return u
    return start


def step_decisions(units: list[list[Item]], cut: StepCut) -> dict[int, Decision]:
    """Every message's decision under ``cut``."""
    summarized = (
        "older message replaced by the summary placeholder (the previous turn's cut, held)"
        if cut.held
        else "older message replaced by the summary placeholder (cut in a step, to the low-water mark)"
    )
    decisions: dict[int, Decision] = {}
    for u, unit in enumerate(units):
        for m in unit:
            if u == 0 and cut.keep_first:
                decisions[m.index] = Decision("kept", "first message")
            elif u < cut.start:
                decisions[m.index] = Decision("summarized", summarized)
            else:
                decisions[m.index] = Decision("kept", "recent message; fits")
    return decisions
