"""History trimming: keep the first message and the most recent ones, summarize the middle.

Better than the seed: the newest message or tool-call group is always kept (its messages cut,
largest first, if they must be), and a tool call is never separated from its results (they form
one unit, kept or dropped together).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..items import Cut, Decision, HistoryCut, Item
from .shares import exceeds, water_level
from .steps import Steps, cut_of, step_cut, step_decisions

__all__ = ["MIN_CUT_TOKENS", "HistorySelection", "newest_unit", "select_history", "units_of"]

# An older message is cut into the room left only when that room holds at least this many tokens.
MIN_CUT_TOKENS = 128

# The decisions most messages of a long history share (one value each: a decision is frozen).
_FIRST = Decision("kept", "first message")
_RECENT = Decision("kept", "recent message; fits")
_SUMMARIZED = Decision("summarized", "older message replaced by the summary placeholder")
_NO_PLACEHOLDER = Decision("dropped", "older message; no room even for the summary placeholder")


@dataclass(frozen=True)
class HistorySelection:
    """Decisions per history index, and where the placeholder goes (-1: before everything)."""

    decisions: Mapping[int, Decision]
    placeholder_after: int | None
    omitted: int
    tokens: int
    cut: HistoryCut | None = None  # a stepped cut, for the next turn to hold


def units_of(messages: list[Item]) -> list[list[Item]]:
    """Messages grouped into units: a tool call with its results is one unit, any other message one."""
    units: list[list[Item]] = []
    for message in messages:
        if units and units[-1][-1].group == message.group and message.group >= 0:
            units[-1].append(message)
        else:
            units.append([message])
    return units


def newest_unit(messages: list[Item]) -> list[Item]:
    """``units_of(messages)[-1]``, read back from the end (a fit asks for it twice: the whole
    grouping of a 2,000-message history took 0.13 ms each time)."""
    start = len(messages) - 1
    group = messages[start].group
    while start > 0 and group >= 0 and messages[start - 1].group == group:
        start -= 1
    return messages[start:]


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


@dataclass(frozen=True)
class _Pricing:
    """How the history is priced and cut: each message's cost, what no cut of it removes (its
    tokens that are not text), the cut itself, and the summary placeholder's cost."""

    costs: Mapping[int, int]
    fixed: Mapping[int, int]
    shrink: Callable[[Item, int], Cut]
    placeholder_cost: int
    at_least: Mapping[int, int] | None = None
    # The cut against a given question (a stepped cut's unit, cut as at its step); None: ``shrink``.
    shrink_against: Callable[[Item, int, str], Cut] | None = None

    def of(self, unit: list[Item]) -> int:
        """The unit's cost: the sum of its messages' costs."""
        if len(unit) == 1:  # most units: a message (no generator for it)
            return self.costs[unit[0].index]
        return sum(self.costs[m.index] for m in unit)

    def fits(self, unit: list[Item], room: int) -> bool:
        """Whether the unit costs at most ``room`` (its bound is read first: a unit over the room
        by its bound alone is never counted)."""
        at_least = self.at_least
        if at_least is not None:
            if len(unit) == 1:
                if at_least[unit[0].index] > room:
                    return False
            elif exceeds((at_least[m.index] for m in unit), room):
                return False
        return self.of(unit) <= room

    def shrink_unit(
        self, unit: list[Item], budget: int, query: str | None = None
    ) -> tuple[dict[int, Decision], int]:
        """The unit cut to ``budget``, its largest texts first (see :func:`_shrink_unit`), against
        ``query`` when given (else the question now)."""
        against = self.shrink_against
        shrink = self.shrink if query is None or against is None else (lambda m, t: against(m, t, query))
        return _shrink_unit(unit, self.costs, self.fixed, budget, shrink)


def select_history(
    messages: list[Item],
    costs: Mapping[int, int],
    budget: int,
    *,
    placeholder_cost: int,
    shrink: Callable[[Item, int], Cut],
    fixed: Mapping[int, int] | None = None,
    at_least: Mapping[int, int] | None = None,
    steps: Steps | None = None,
    first_required: bool = False,
    after_question: int | None = None,
    shrink_against: Callable[[Item, int, str], Cut] | None = None,
    query: str = "",
) -> HistorySelection:
    """Fit the history in ``budget`` tokens. ``shrink(message, tokens)`` cuts a message's text so
    that the whole message costs at most ``tokens``; ``fixed`` is what no cut of a message removes
    (its tokens that are not text); ``at_least`` (lower bounds of ``costs``) spares reading the
    costs of messages that cannot fit (reading one may mean tokenizing it). With ``steps`` the
    history is cut in steps that later turns hold (:mod:`.steps`). With ``first_required`` the
    first unit is kept before any other, the newest too (:func:`_after_required_first`).
    ``after_question``: the first message after the question when history comes before it too;
    what is omitted on each side takes a placeholder of its own (:func:`_placeholders`).
    ``shrink_against(message, tokens, question)`` cuts as ``shrink`` does against a given question,
    and ``query`` is the question now: a stepped cut that keeps a unit cut down records the
    question it was cut against, and the turns that hold it cut it against that one."""
    pricing = _Pricing(costs, fixed or {}, shrink, placeholder_cost, at_least, shrink_against)
    if pricing.fits(messages, budget):
        return HistorySelection(
            dict.fromkeys((m.index for m in messages), Decision("kept", "whole history fits")),
            None,
            0,
            budget,
        )
    units = units_of(messages)
    if first_required and len(units) > 1:
        rest = [m for unit in units[1:] for m in unit]
        return _after_required_first(units[0], rest, budget, pricing)
    if steps is not None:
        stepped = _stepped(units, budget, pricing, steps, query)
        if stepped is not None:
            return stepped
    decisions, remaining = _keep_newest(units, budget, pricing)
    keep_units, cuts, remaining = _keep_older(units, remaining, pricing)
    decisions |= cuts
    keep_units.add(len(units) - 1)
    omitted = sum(len(units[u]) for u in range(len(units)) if u not in keep_units)
    decisions |= _unit_decisions(units, keep_units, decisions)
    placeholder_after = None
    if omitted:
        held = _placeholders(decisions, placeholder_cost, remaining, after_question)
        if held:
            placeholder_after = units[0][-1].index if 0 in keep_units else -1
            remaining -= held
    return HistorySelection(decisions, placeholder_after, omitted, budget - remaining)


def _placeholders(decisions: dict[int, Decision], cost: int, room: int, after_question: int | None) -> int:
    """The tokens of the placeholders the summarized messages take: one, or one each side of the
    question (``after_question``). When only one fits, the steps after the question keep theirs
    (an agent's own steps on this question) and the turns before it are dropped; when none fits,
    all are. ``decisions`` are changed in place to say so."""
    summarized = [i for i, d in decisions.items() if d.action == "summarized"]
    sides = {after_question is not None and i >= after_question for i in summarized}
    if cost * len(sides) <= room:
        return cost * len(sides)
    keep = {True} if len(sides) == 2 and cost <= room else set()
    for index in summarized:
        if (after_question is not None and index >= after_question) not in keep:
            decisions[index] = _NO_PLACEHOLDER
    return cost * len(keep)


REQUIRED_FIRST = "answers a call of the stored response: kept before any other message"


def _after_required_first(
    first: list[Item], rest: list[Item], budget: int, pricing: _Pricing
) -> HistorySelection:
    """The required first unit kept (cut to the budget if it must be), then the rest selected as a
    history of its own in the room left; none of it when that room cannot hold even what no cut
    of the newest unit removes. The placeholder for what the rest omits follows the first unit."""
    cost = pricing.of(first)
    decisions: dict[int, Decision] = {m.index: Decision("kept", REQUIRED_FIRST) for m in first}
    if cost > budget:
        cut, cost = pricing.shrink_unit(first, budget)
        decisions |= {
            i: dataclasses.replace(d, reason=REQUIRED_FIRST + "; cut to fit") for i, d in cut.items()
        }
    room = budget - cost
    newest = units_of(rest)[-1]
    if room < sum(pricing.fixed.get(m.index, 0) for m in newest) + 1:
        gone = Decision("dropped", "no room beside the outputs answering the stored response's calls")
        return HistorySelection(decisions | {m.index: gone for m in rest}, None, 0, cost)
    chosen = select_history(
        rest,
        pricing.costs,
        room,
        placeholder_cost=pricing.placeholder_cost,
        shrink=pricing.shrink,
        fixed=pricing.fixed,
        at_least=pricing.at_least,
    )
    after = first[-1].index if chosen.placeholder_after == -1 else chosen.placeholder_after
    return HistorySelection(decisions | dict(chosen.decisions), after, chosen.omitted, cost + chosen.tokens)


def _stepped(
    units: list[list[Item]], budget: int, pricing: _Pricing, steps: Steps, query: str
) -> HistorySelection | None:
    """The history cut in steps (:func:`.steps.step_cut`); None when the usual selection applies
    (also when a unit the cut keeps cut down cannot be cut to its size: what no cut removes)."""
    costs = [pricing.of(unit) for unit in units]
    cut = step_cut(units, costs, budget, pricing.placeholder_cost, steps, query)
    if cut is None:
        return None
    decisions = step_decisions(units, cut)
    opening = costs[cut.start]
    if cut.budget is not None and opening > cut.budget:
        shrunk, opening = pricing.shrink_unit(units[cut.start], cut.budget, cut.query)
        if opening > cut.budget:
            return None
        reason = (
            "too large for a cut: cut down once, at a step, to its passages that matched the question then"
        )
        decisions |= {i: dataclasses.replace(d, reason=reason) for i, d in shrunk.items()}
    first = 1 if cut.keep_first else 0
    omitted = sum(len(unit) for unit in units[first : cut.start])
    after: int | None = units[0][-1].index if cut.keep_first else -1
    placeholder = pricing.placeholder_cost
    if cut.budget is not None and not omitted:  # only a unit cut down: no message to stand for
        after, placeholder = None, 0
    used = opening + sum(costs[cut.start + 1 :]) + (costs[0] if cut.keep_first else 0) + placeholder
    return HistorySelection(
        decisions, after, omitted, used, cut=cut_of(units, cut.start, cut.keep_first, cut.budget, cut.query)
    )


def _keep_newest(units: list[list[Item]], budget: int, pricing: _Pricing) -> tuple[dict[int, Decision], int]:
    """The newest unit, always kept (cut to ``budget`` if it must be, less the placeholder's
    room when older units will be summarized: they never vanish without a trace): its decisions
    and the room left."""
    remaining = budget - pricing.of(units[-1])
    if remaining >= 0:
        return {}, remaining
    held = pricing.placeholder_cost if len(units) > 1 and budget > pricing.placeholder_cost else 0
    cut, cost = pricing.shrink_unit(units[-1], budget - held)
    return cut, budget - cost


def _keep_older(
    units: list[list[Item]], remaining: int, pricing: _Pricing
) -> tuple[set[int], dict[int, Decision], int]:
    """The older units kept in ``remaining`` tokens: the first when it fits with the placeholder,
    then the newest ones first. Returns the units kept, the cuts made, and the room left."""
    keep_units: set[int] = set()
    decisions: dict[int, Decision] = {}
    placeholder_cost = pricing.placeholder_cost
    if len(units) > 1 and pricing.fits(units[0], remaining - placeholder_cost):
        keep_units.add(0)
        remaining -= pricing.of(units[0])
    # Newest first, then the first unit when it did not fit whole: the first that does not fit is
    # cut into the room left (its passages that match the question), when that room is worth a
    # message; older ones are summarized (room is held for the placeholder while any may be).
    middle = list(range(1, len(units) - 1))
    candidates = [*reversed(middle), *([0] if len(units) > 1 and 0 not in keep_units else [])]
    for n, u in enumerate(candidates):
        reserve = 0 if n == len(candidates) - 1 else placeholder_cost
        if pricing.fits(units[u], remaining - reserve):
            keep_units.add(u)
            remaining -= pricing.of(units[u])
            continue
        room = remaining - reserve
        if room >= MIN_CUT_TOKENS:
            cut, cost = pricing.shrink_unit(units[u], room)
            if cost <= room:
                reason = "older message cut to the room left: its passages that match the question"
                decisions |= {i: dataclasses.replace(d, reason=reason) for i, d in cut.items()}
                keep_units.add(u)
                remaining -= cost
        break
    return keep_units, decisions, remaining


def _unit_decisions(
    units: list[list[Item]], keep_units: set[int], decided: Mapping[int, Decision]
) -> dict[int, Decision]:
    """Decisions for the messages not yet decided: kept with their unit, or summarized."""
    decisions: dict[int, Decision] = {}
    for u, unit in enumerate(units):
        decision = (_FIRST if u == 0 else _RECENT) if u in keep_units else _SUMMARIZED
        for m in unit:
            if m.index not in decided:
                decisions[m.index] = decision
    return decisions
