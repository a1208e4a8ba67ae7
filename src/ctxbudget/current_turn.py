"""Block 4: the current turn (the question, tool calls and tool results) within its ceiling. Pure.

The question and the tool calls are never cut: if they alone exceed the ceiling, the turn fails
closed naming them. Tool results share the rest by a common level (the largest is cut first) and
each keeps the passages that best match the question, verbatim, in order, with a marker where
text was left out (:func:`ctxbudget.trim.messages.cut_message`), so ``page:line`` labels and ids
stay with the lines they number. A result sent as a provider message keeps its structure (tool
ids, blocks); only its texts change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .errors import BudgetExceeded
from .formats.base import PIECE_SEP
from .formats.chat import content_pieces, with_content_text
from .formats.context import ContextItem
from .tiers import ItemDecision
from .tokens.counter import TokenCounter, analyze
from .trim.messages import cut_message
from .trim.shares import water_level
from .trim.text import TextSpan

__all__ = ["CURRENT_HINT", "bound_current"]

CURRENT_HINT = (
    "the question and tool calls are never cut: shorten the question, or raise the policy's "
    "current_turn_ceiling_tokens"
)
_ROUNDS = 6


def _pieces(item: ContextItem) -> tuple[str, ...]:
    """The texts of the provider message behind ``item`` when they make its text, else ()."""
    if item.source is None:
        return ()
    pieces = tuple(content_pieces(item.source.get("content")))
    return pieces if PIECE_SEP.join(pieces) == item.text else ()


def _bounds(pieces: Sequence[str]) -> tuple[tuple[int, int], ...]:
    out, start = [], 0
    for piece in pieces:
        out.append((start, start + len(piece)))
        start += len(piece) + len(PIECE_SEP)
    return tuple(out)


def _cut(item: ContextItem, budget: int, query: str, counter: TokenCounter) -> ContextItem:
    """``item`` cut to at most ``budget`` raw tokens (verified; the budget tightens until it holds)."""
    pieces = _pieces(item)
    span = TextSpan(analyze(counter.encoding, item.text), 0, len(item.text.encode("utf-8")))
    target = budget
    for _ in range(_ROUNDS):
        kept = cut_message(
            item.text,
            span,
            target,
            query,
            count_text=counter.raw,
            keep_question=False,
            bounds=_bounds(pieces),
        )
        text = PIECE_SEP.join(kept)
        if counter.raw(text) <= budget:
            break
        target -= max(1, counter.raw(text) - budget)
    else:
        text, kept = "", ("",) * max(1, len(pieces))
    source = with_content_text(item.source, text, kept if pieces else ()) if item.source else None
    return dataclasses.replace(item, text=text, source=source)


def bound_current(
    items: Sequence[ContextItem], counter: TokenCounter, ceiling: int | None, query: str
) -> tuple[tuple[ContextItem, ...], tuple[ItemDecision, ...]]:
    """The current turn within ``ceiling`` scaled tokens (None: as given), and a decision per item."""
    cost = counter.raw
    sizes = {i.id: cost(i.text) for i in items}
    if ceiling is None or sum(sizes.values()) <= counter.unscale(ceiling):
        return tuple(items), tuple(_decision(i, sizes[i.id], sizes[i.id], "current turn") for i in items)
    limit = counter.unscale(ceiling)
    fixed = [i for i in items if i.kind != "tool_result"]
    fixed_cost = sum(sizes[i.id] for i in fixed)
    if fixed_cost > limit:
        parts: dict[str, int] = {}
        for item in fixed:
            label = "the question (never cut)" if item.kind == "question" else "tool calls (never cut)"
            parts[label] = parts.get(label, 0) + counter.scale(sizes[item.id])
        raise BudgetExceeded(
            available_tokens=ceiling,
            required_tokens=counter.scale(fixed_cost),
            parts={f"current turn (Block 4): {k}": v for k, v in parts.items()},
            hint=CURRENT_HINT,
        )
    results = [i for i in items if i.kind == "tool_result"]
    level = water_level([sizes[i.id] for i in results], limit - fixed_cost)
    out, decisions = [], []
    for item in items:
        size = sizes[item.id]
        if item.kind != "tool_result" or size <= level:
            out.append(item)
            decisions.append(_decision(item, size, size, "current turn"))
            continue
        cut = _cut(item, level, query, counter)
        out.append(cut)
        decisions.append(
            _decision(
                item,
                size,
                cost(cut.text),
                "tool result over the current turn's ceiling: kept the passages that best match "
                "the question, verbatim",
            )
        )
    return tuple(out), tuple(decisions)


def _decision(item: ContextItem, before: int, after: int, reason: str) -> ItemDecision:
    action = "kept" if after == before else ("compacted" if after else "dropped")
    return ItemDecision(id=item.id, action=action, tokens_before=before, tokens_after=after, reason=reason)
