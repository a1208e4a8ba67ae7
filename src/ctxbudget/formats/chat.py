"""What the OpenAI and Anthropic chat formats share: splitting messages into the four components.

Leading system messages are the system prompt; the final user message (unless it only carries
tool results) is the query; everything between is history. A tool call and its results form one
group, so trimming keeps or drops them together.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .base import PLACEHOLDER_TEMPLATE, Component, Item, Plan

__all__ = [
    "apply_history",
    "content_text",
    "items_from_messages",
    "split_messages",
    "text_part_indexes",
    "with_content_text",
]


def text_part_indexes(content: Any) -> list[int]:
    """Positions of the ``{"type": "text"}`` parts (OpenAI) or blocks (Anthropic) of a content list."""
    if not isinstance(content, list):
        return []
    return [i for i, part in enumerate(content) if isinstance(part, dict) and part.get("type") == "text"]


def content_text(content: Any) -> str:
    """The trimmable text of a content: the string itself, or the last text part's text."""
    if isinstance(content, str):
        return content
    parts = text_part_indexes(content)
    return str(content[parts[-1]].get("text", "")) if parts else ""


def with_content_text(message: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A deep copy of ``message`` whose trimmable text is ``text`` (every other field kept)."""
    out = copy.deepcopy(dict(message))
    if isinstance(out.get("content"), str):
        out["content"] = text
    elif parts := text_part_indexes(out.get("content")):
        out["content"][parts[-1]]["text"] = text
    return out


def split_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    is_system: Callable[[Mapping[str, Any]], bool],
    is_query: Callable[[Mapping[str, Any]], bool],
) -> list[tuple[Component, int, int]]:
    """(component, index within component, message index) for every message."""
    n_system = 0
    while n_system < len(messages) and is_system(messages[n_system]):
        n_system += 1
    has_query = len(messages) > n_system and is_query(messages[-1])
    out: list[tuple[Component, int, int]] = [("system", i, i) for i in range(n_system)]
    end = len(messages) - 1 if has_query else len(messages)
    out += [("history", i - n_system, i) for i in range(n_system, end)]
    if has_query:
        out.append(("query", 0, len(messages) - 1))
    return out


def items_from_messages(
    messages: Sequence[Mapping[str, Any]],
    layout: list[tuple[Component, int, int]],
    text_of: Callable[[Mapping[str, Any]], str],
    groups: Sequence[int],
) -> tuple[Item, ...]:
    """Items for the messages as laid out by :func:`split_messages`."""
    return tuple(
        Item(
            component=component,
            index=index,
            path=f"$.messages[{position}]",
            text=text_of(messages[position]),
            role=str(messages[position].get("role", "")),
            group=groups[position],
        )
        for component, index, position in layout
    )


def apply_history(
    messages: Sequence[Mapping[str, Any]],
    layout: list[tuple[Component, int, int]],
    items: tuple[Item, ...],
    plan: Plan,
    replace_text: Callable[[Mapping[str, Any], str], dict[str, Any]],
    placeholder_role: str = "user",
) -> list[dict[str, Any]]:
    """The message list after the plan: kept or truncated messages and the history placeholder."""
    by_key = {item.key: item for item in items}
    placeholder = {
        "role": placeholder_role,
        "content": PLACEHOLDER_TEMPLATE.format(omitted=plan.placeholder_omitted),
    }
    out: list[dict[str, Any]] = []
    for component, index, position in layout:
        key = (component, index)
        if component == "history" and index == 0 and plan.placeholder_after == -1:
            out.append(dict(placeholder))
        if plan.kept(key):
            item = by_key[key]
            new_text = plan.text_of(item)
            message = messages[position]
            out.append(
                replace_text(message, new_text) if new_text != item.text else copy.deepcopy(dict(message))
            )
        if component == "history" and plan.placeholder_after == index:
            out.append(dict(placeholder))
    return out
