"""Block 4: the current turn (the question, tool calls and tool results) within its ceiling. Pure.

The question and the tool calls are never cut: if they alone exceed the ceiling, the turn fails
closed naming them. The question is what the user typed (a string, the message's own text
blocks); tool results or documents sent in the same message may be cut like a tool result. Tool results share
the rest by a common level (the largest is cut first) and each keeps the passages that best match
the question, verbatim, in order, with a marker where text was left out
(:func:`ctxbudget.trim.messages.cut_message`), so ``page:line`` labels and ids stay with the lines
they number. A message sent as a provider message keeps its structure (tool ids, blocks); only its
texts change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import BudgetExceeded
from ..formats import FORMATS
from ..formats.chat import Location, text_locations, with_content_text
from ..items import PIECE_SEP
from ..tokens.counter import TokenCounter, analyze
from ..trim.messages import cut_message
from ..trim.shares import water_level
from ..trim.text import TextSpan
from ._message_tokens import framing_raw, message_raw
from ._request import ContextItem
from ._tiers import ItemDecision

__all__ = ["CURRENT_HINT", "bound_current"]

CURRENT_HINT = (
    "the question and tool calls are never cut: shorten the question, or raise the policy's "
    "current_turn_ceiling_tokens"
)
_ROUNDS = 6


def _bounds(pieces: Sequence[str]) -> tuple[tuple[int, int], ...]:
    out, start = [], 0
    for piece in pieces:
        out.append((start, start + len(piece)))
        start += len(piece) + len(PIECE_SEP)
    return tuple(out)


def _typed(location: Location) -> bool:
    """A piece the user typed: a string content or a message's own text block (not a tool
    result's text, not a document's data)."""
    return location == () or (len(location) == 2 and location[1] == "text")


def _pieces(item: ContextItem) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """The item's pieces and, per piece, whether it may be cut: a tool result's pieces all may;
    of a question, what the user typed may not (tool results or documents sent with it may)."""
    located = text_locations(item.source.get("content")) if item.source is not None else []
    pieces = tuple(text for _, text in located)
    if not pieces or PIECE_SEP.join(pieces) != item.text:
        return (item.text,), (item.kind == "tool_result",)
    if item.kind != "question":
        return pieces, (True,) * len(pieces)
    return pieces, tuple(not _typed(location) for location, _ in located)


def _fixed_tokens(item: ContextItem, counter: TokenCounter) -> int:
    """Tokens of the item that are never cut (tool calls whole; the question's typed text)."""
    if item.kind == "tool_call":
        return counter.raw(item.text)
    pieces, cuttable = _pieces(item)
    kept = [p for p, c in zip(pieces, cuttable, strict=True) if not c]
    # joined as they are sent, separators counted (a message of 2,000 one-word parts is 4,000 tokens)
    return counter.raw(PIECE_SEP.join(kept)) + (
        counter.raw(PIECE_SEP) if kept and len(kept) < len(pieces) else 0
    )


def _cut_pieces(movable: list[str], room: int, query: str, counter: TokenCounter) -> tuple[str, ...]:
    """``movable`` cut to at most ``room`` raw tokens together (verified; the target tightens
    until it holds)."""
    text = PIECE_SEP.join(movable)
    span = TextSpan(analyze(counter.encoding, text, ends=True), 0, len(text.encode("utf-8")))
    target = room
    for _ in range(_ROUNDS):
        cut = cut_message(
            text, span, target, query, count_text=counter.raw, keep_question=False, bounds=_bounds(movable)
        )
        kept = tuple(piece for piece, _ in cut)
        over = counter.raw(PIECE_SEP.join(kept)) - room
        if over <= 0:
            return kept
        target -= max(1, over)
    return ("",) * len(movable)


def _cut(item: ContextItem, budget: int, query: str, counter: TokenCounter) -> ContextItem:
    """``item`` within ``budget`` raw tokens: its cuttable pieces cut, the others as they are; a
    provider message keeps its structure."""
    pieces, cuttable = _pieces(item)
    fixed = _fixed_tokens(item, counter) if item.kind == "question" else 0
    movable = [p for p, c in zip(pieces, cuttable, strict=True) if c]
    kept = iter(_cut_pieces(movable, budget - fixed, query, counter))
    new = tuple(next(kept) if c else p for p, c in zip(pieces, cuttable, strict=True))
    text = PIECE_SEP.join(new)
    source = with_content_text(item.source, text, new) if item.source is not None else None
    return dataclasses.replace(item, text=text, source=source)


def _asked(items: Sequence[ContextItem]) -> str:
    """What the user typed in the question items (what tool results are matched against)."""
    typed = []
    for item in items:
        if item.kind == "question":
            pieces, cuttable = _pieces(item)
            typed += [p for p, c in zip(pieces, cuttable, strict=True) if not c]
    return " ".join(typed)


_MEDIA = ("image", "image_url", "input_audio", "file", "document")


def _has_media(value: Any) -> bool:
    """Whether a content holds an image, audio, a file or a non-text document (at any depth)."""
    if isinstance(value, list):
        return any(_has_media(v) for v in value)
    if not isinstance(value, Mapping):
        return False
    source = value.get("source")
    text_document = (
        value.get("type") == "document" and isinstance(source, Mapping) and source.get("type") == "text"
    )
    return (value.get("type") in _MEDIA and not text_document) or _has_media(value.get("content"))


def _media_tokens(item: ContextItem, counter: TokenCounter) -> int:
    """Tokens of what a message carries besides text (images, PDFs, audio), as its format counts
    them: never cut here, so they count against the block as they are."""
    fmt = item.source_format
    if item.source is None or fmt is None or fmt not in FORMATS or not _has_media(item.source.get("content")):
        return 0
    emptied = with_content_text(item.source, "", ("",) * len(text_locations(item.source.get("content"))))
    role = str(item.source.get("role", "user"))
    return max(0, message_raw(fmt, emptied, counter.encoding) - framing_raw(fmt, role, counter.encoding))


def bound_current(
    items: Sequence[ContextItem], counter: TokenCounter, ceiling: int | None, query: str
) -> tuple[tuple[ContextItem, ...], tuple[ItemDecision, ...]]:
    """The current turn within ``ceiling`` scaled tokens (None: as given), and a decision per item
    (its tokens include its images and other media); cut text is chosen by the user's question
    (``query`` when the turn has none)."""
    cost = counter.raw
    media = {i.id: _media_tokens(i, counter) for i in items}
    sizes = {i.id: cost(i.text) + media[i.id] for i in items}
    if ceiling is None or sum(sizes.values()) <= counter.unscale(ceiling):
        return tuple(items), tuple(_decision(i, sizes[i.id], sizes[i.id], "current turn") for i in items)
    limit = counter.unscale(ceiling)
    fixed = {i.id: media[i.id] + (_fixed_tokens(i, counter) if i.kind != "tool_result" else 0) for i in items}
    if sum(fixed.values()) > limit:
        _fail(items, fixed, media, counter, ceiling)
    query = _asked(items) or query
    cuttable = [i for i in items if i.kind != "tool_call"]
    level = water_level([sizes[i.id] - fixed[i.id] for i in cuttable], limit - sum(fixed.values()))
    out, decisions = [], []
    for item in items:
        size, floor = sizes[item.id], fixed[item.id]
        if item.kind == "tool_call" or size - floor <= level:
            out.append(item)
            decisions.append(_decision(item, size, size, "current turn"))
            continue
        cut = _cut(item, floor - media[item.id] + level, query, counter)
        out.append(cut)
        what = (
            "what came with the question (its text kept whole)" if item.kind == "question" else "tool result"
        )
        decisions.append(
            _decision(
                item,
                size,
                cost(cut.text) + media[item.id],
                f"{what} over the current turn's ceiling: kept the passages that best match the question, verbatim",
            )
        )
    _verify(out, media, counter, limit, ceiling)
    return tuple(out), tuple(decisions)


def _verify(
    items: Sequence[ContextItem], media: dict[str, int], counter: TokenCounter, limit: int, ceiling: int
) -> None:
    """The block as cut, counted as it is sent; over the ceiling (rounding, separators) fails closed."""
    total = sum(counter.raw(i.text) + media[i.id] for i in items)
    if total > limit:
        raise BudgetExceeded(
            available_tokens=ceiling,
            required_tokens=counter.scale(total),
            parts={"current turn (Block 4), as cut": counter.scale(total)},
            hint=CURRENT_HINT,
        )


def _fail(
    items: Sequence[ContextItem],
    fixed: dict[str, int],
    media: dict[str, int],
    counter: TokenCounter,
    ceiling: int,
) -> None:
    parts: dict[str, int] = {}
    for item in items:
        if media[item.id]:
            parts["images and other media (never cut)"] = (
                parts.get("images and other media (never cut)", 0) + media[item.id]
            )
        text = fixed[item.id] - media[item.id]
        if text:
            label = "the question (never cut)" if item.kind == "question" else "tool calls (never cut)"
            parts[label] = parts.get(label, 0) + text
    raise BudgetExceeded(
        available_tokens=ceiling,
        required_tokens=counter.scale(sum(fixed.values())),
        parts={f"current turn (Block 4): {k}": counter.scale(v) for k, v in parts.items()},
        hint=CURRENT_HINT,
    )


def _decision(item: ContextItem, before: int, after: int, reason: str) -> ItemDecision:
    action = "kept" if after == before else ("compacted" if after else "dropped")
    return ItemDecision(id=item.id, action=action, tokens_before=before, tokens_after=after, reason=reason)
