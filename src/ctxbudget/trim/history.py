"""History trimming: keep the first message and the most recent ones, summarize the middle.

Better than the seed: the newest message or tool-call group is always kept (its messages cut,
largest first, if they must be), and a tool call is never separated from its results (they form
one unit, kept or dropped together).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..items import Cut, Decision, Item
from .shares import water_level

__all__ = ["MIN_CUT_TOKENS", "HistorySelection", "select_history", "units_of"]

# An older message is cut into the room left only when that room holds at least this many tokens.
MIN_CUT_TOKENS = 128


@dataclass(frozen=True)
class HistorySelection:
    """Decisions per history index, and where the placeholder goes (-1: before everything)."""

    decisions: Mapping[int, Decision]
    placeholder_after: int | None
    omitted: int
    tokens: int


def units_of(messages: list[Item]) -> list[list[Item]]:
    """Messages grouped into units: a tool call with its results is one unit, any other message one."""
    units: list[list[Item]] = []
    for message in messages:
        if units and units[-1][-1].group == message.group and message.group >= 0:
            units[-1].append(message)
        else:
            units.append([message])
    return units


def _shrink_unit(
    unit: list[Item],
    costs: Mapping[int, int],
    fixed: Mapping[int, int],
    budget: int,
    shrink: Callable[[Item, int], Cut],
) -> tuple[dict[int, Decision], int]:
    """Cut the unit's messages, largest text first, until the unit fits ``budget``: in a tool group
    any result (or call text) may be the one that is too long. Texts above a common level are
    cut to it; what no cut removes (``fixed``: roles, tool calls, thinking, images) stays.
    Returns the decisions and the unit's cost after."""
    total = sum(costs[m.index] for m in unit)
    if total <= budget:
        return {}, total
    text = {m.index: max(0, costs[m.index] - fixed.get(m.index, 0)) for m in unit}
    cap = water_level(list(text.values()), budget - (total - sum(text.values())))
    decisions: dict[int, Decision] = {}
    reason = "newest message is always kept; cut to fit"
    if len(unit) > 1:
        reason = "in a tool-call group, kept whole as a unit; its largest texts cut to fit"
    for message in sorted(unit, key=lambda m: (-text[m.index], -m.index)):
        size = text[message.index]
        if total <= budget or size == 0:
            break
        left = size - (total - budget)  # just what is still over
        keep = max(cap, left) if size > cap else left
        cut = shrink(message, costs[message.index] - size + max(0, min(keep, size)))
        decisions[message.index] = Decision("truncated", reason, cut.text, pieces=cut.pieces)
        total += cut.tokens - costs[message.index]
    return decisions, total


def select_history(
    messages: list[Item],
    costs: Mapping[int, int],
    budget: int,
    *,
    placeholder_cost: int,
    shrink: Callable[[Item, int], Cut],
    fixed: Mapping[int, int] | None = None,
) -> HistorySelection:
    """Fit the history in ``budget`` tokens. ``shrink(message, tokens)`` cuts a message's text so
    that the whole message costs at most ``tokens``; ``fixed`` is what no cut of a message removes
    (its tokens that are not text)."""
    fixed = fixed or {}
    if sum(costs[m.index] for m in messages) <= budget:
        return HistorySelection(
            {m.index: Decision("kept", "whole history fits") for m in messages}, None, 0, budget
        )
    units = units_of(messages)
    unit_cost = [sum(costs[m.index] for m in unit) for unit in units]
    decisions: dict[int, Decision] = {}
    remaining = budget - unit_cost[-1]
    if remaining < 0:
        cut, cost = _shrink_unit(units[-1], costs, fixed, budget, shrink)
        decisions |= cut
        remaining = budget - cost
    keep_units = {len(units) - 1}
    middle = list(range(1, len(units) - 1))
    if len(units) > 1 and unit_cost[0] + placeholder_cost <= remaining:
        keep_units.add(0)
        remaining -= unit_cost[0]
    # Newest first, then the first unit when it did not fit whole: the first that does not fit is
    # cut into the room left (its passages that match the question), when that room is worth a
    # message; older ones are summarized (room is held for the placeholder while any may be).
    candidates = [*reversed(middle), *([0] if len(units) > 1 and 0 not in keep_units else [])]
    for n, u in enumerate(candidates):
        reserve = 0 if n == len(candidates) - 1 else placeholder_cost
        if unit_cost[u] <= remaining - reserve:
            keep_units.add(u)
            remaining -= unit_cost[u]
            continue
        room = remaining - reserve
        if room >= MIN_CUT_TOKENS:
            cut, cost = _shrink_unit(units[u], costs, fixed, room, shrink)
            if cost <= room:
                reason = "older message cut to the room left: its passages that match the question"
                decisions |= {i: dataclasses.replace(d, reason=reason) for i, d in cut.items()}
                keep_units.add(u)
                remaining -= cost
        break
    omitted = sum(len(units[u]) for u in range(len(units)) if u not in keep_units)
    for u, unit in enumerate(units):
        for m in unit:
            if m.index in decisions:
                continue
            if u in keep_units:
                decisions[m.index] = Decision("kept", "first message" if u == 0 else "recent message; fits")
            else:
                decisions[m.index] = Decision(
                    "summarized", "older message replaced by the summary placeholder"
                )
    placeholder_after = None
    if omitted and placeholder_cost <= remaining:
        placeholder_after = units[0][-1].index if 0 in keep_units else -1
        remaining -= placeholder_cost
    elif omitted:
        for index, decision in list(decisions.items()):
            if decision.action == "summarized":
                decisions[index] = Decision(
                    "dropped", "older message; no room even for the summary placeholder"
                )
    return HistorySelection(decisions, placeholder_after, omitted, budget - remaining)
