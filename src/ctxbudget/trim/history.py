"""History trimming: keep the first message and the most recent ones, summarize the middle.

Better than the seed: the latest message is always kept (truncated if it must be), and a tool
call is never separated from its results (they form one unit, kept or dropped together).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..formats.base import Decision, Item

__all__ = ["HistorySelection", "select_history"]


@dataclass(frozen=True)
class HistorySelection:
    """Decisions per history index, and where the placeholder goes (-1: before everything)."""

    decisions: Mapping[int, Decision]
    placeholder_after: int | None
    omitted: int
    tokens: int


def _units(messages: list[Item]) -> list[list[Item]]:
    units: list[list[Item]] = []
    for message in messages:
        if units and units[-1][-1].group == message.group and message.group >= 0:
            units[-1].append(message)
        else:
            units.append([message])
    return units


def select_history(
    messages: list[Item],
    costs: Mapping[int, int],
    budget: int,
    *,
    placeholder_cost: int,
    truncate_last: Callable[[Item, int], tuple[str, int]],
) -> HistorySelection:
    """Fit the history in ``budget`` tokens; ``truncate_last`` shortens the latest message."""
    if sum(costs[m.index] for m in messages) <= budget:
        return HistorySelection(
            {m.index: Decision("kept", "whole history fits") for m in messages}, None, 0, budget
        )
    units = _units(messages)
    unit_cost = [sum(costs[m.index] for m in unit) for unit in units]
    decisions: dict[int, Decision] = {}
    last = units[-1]
    remaining = budget - unit_cost[-1]
    if remaining < 0:
        latest = last[-1]
        others = unit_cost[-1] - costs[latest.index]
        text, tokens = truncate_last(latest, max(0, budget - others))
        decisions[latest.index] = Decision(
            "truncated", "latest message is always kept; truncated to fit", text
        )
        remaining = budget - others - tokens
    keep_units = {len(units) - 1}
    middle = list(range(1, len(units) - 1))
    if len(units) > 1 and unit_cost[0] + placeholder_cost <= remaining:
        keep_units.add(0)
        remaining -= unit_cost[0]
    reserve = placeholder_cost
    for u in reversed(middle):
        if unit_cost[u] <= remaining - reserve:
            keep_units.add(u)
            remaining -= unit_cost[u]
        else:
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
