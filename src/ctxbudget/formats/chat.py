"""What the OpenAI and Anthropic chat formats share: splitting messages into the four components.

Leading system messages are the system prompt; the latest user turn (a user message that does
not only carry tool results) is the query, wherever it stands; every other message is history.
A tool call and its results form one group, so trimming keeps or drops them together.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .base import PLACEHOLDER_TEMPLATE, Component, Item, Plan

__all__ = [
    "JOINED",
    "Location",
    "apply_history",
    "content_text",
    "items_from_messages",
    "split_messages",
    "text_location",
    "text_part_indexes",
    "text_parts",
    "with_content_text",
]


def text_part_indexes(content: Any) -> list[int]:
    """Positions of the ``{"type": "text"}`` parts (OpenAI) or blocks (Anthropic) of a content list."""
    if not isinstance(content, list):
        return []
    return [i for i, part in enumerate(content) if isinstance(part, dict) and part.get("type") == "text"]


Location = tuple[str | int, ...]


def _texts(content: Any) -> Iterator[tuple[Location, str]]:
    """Every text a content carries, with where it sits: the string itself, text parts or
    blocks, and the text of Anthropic ``tool_result`` blocks (a string, or text sub-blocks)."""
    if isinstance(content, str):
        yield (), content
        return
    for i, part in enumerate(content if isinstance(content, list) else []):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            yield (i, "text"), part["text"]
        elif part.get("type") == "document" and isinstance(part.get("source"), dict):
            source = part["source"]
            if source.get("type") == "text" and isinstance(source.get("data"), str):
                yield (i, "source", "data"), source["data"]
        elif part.get("type") == "tool_result":
            inner = part.get("content")
            if isinstance(inner, str):
                yield (i, "content"), inner
            for j, sub in enumerate(inner if isinstance(inner, list) else []):
                if isinstance(sub, dict) and sub.get("type") == "text" and isinstance(sub.get("text"), str):
                    yield (i, "content", j, "text"), sub["text"]


# A message's text parts read as one text (joined by a blank line): when cut, they become one part.
JOINED: Location = ("*",)
_JOIN = "\n\n"


def text_parts(content: Any) -> list[int]:
    """Positions of the top-level text parts that :data:`JOINED` reads as one text."""
    return [i for i in text_part_indexes(content) if isinstance(content[i].get("text"), str)]


def text_location(content: Any) -> Location | None:
    """Where a content's trimmable text is: all its text parts read as one when there are several
    and together they are the longest text, else its longest text (the last of equals), or None."""
    found = list(_texts(content))
    if not found:
        return None
    longest = max(range(len(found)), key=lambda i: (len(found[i][1]), i))
    parts = text_parts(content)
    contiguous = parts == list(range(parts[0], parts[-1] + 1)) if parts else False
    # Only a run of text parts is read as one: joining across an image would move it.
    if (
        len(parts) > 1
        and contiguous
        and sum(len(content[i]["text"]) for i in parts) >= len(found[longest][1])
    ):
        return JOINED
    return found[longest][0]


def content_text(content: Any) -> str:
    """The trimmable text of a content (see :func:`text_location`), or ``""``."""
    location = text_location(content)
    if location is None:
        return ""
    if location == JOINED:
        return _JOIN.join(content[i]["text"] for i in text_parts(content))
    value = content
    for step in location:
        value = value[step]
    return str(value)


def with_content_text(message: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A deep copy of ``message`` whose trimmable text is ``text`` (every other field kept)."""
    out = copy.deepcopy(dict(message))
    location = text_location(out.get("content"))
    if location == ():
        out["content"] = text
    elif location == JOINED:
        parts = text_parts(out["content"])
        out["content"][parts[0]]["text"] = text
        # A cache breakpoint on the run's last part stays at the end of the run.
        marks = [out["content"][i]["cache_control"] for i in parts if "cache_control" in out["content"][i]]
        if marks:
            out["content"][parts[0]]["cache_control"] = marks[-1]
        out["content"] = [p for i, p in enumerate(out["content"]) if i not in parts[1:]]
    elif location is not None:
        target = out["content"]
        for step in location[:-1]:
            target = target[step]
        target[location[-1]] = text
    return out


def split_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    is_system: Callable[[Mapping[str, Any]], bool],
    is_query: Callable[[Mapping[str, Any]], bool],
) -> list[tuple[Component, int, int]]:
    """(component, index within component, message index) for every message, in message order.

    System messages are the system prompt, wherever they stand (a developer message in the
    middle of a conversation is an instruction too); the query is the latest user turn wherever it
    stands (an agent loop ends in tool calls and results after it); the rest is history.
    """
    query = next((i for i in range(len(messages) - 1, -1, -1) if is_query(messages[i])), None)
    out: list[tuple[Component, int, int]] = []
    counters = {"system": 0, "history": 0}
    for position, message in enumerate(messages):
        if position == query:
            out.append(("query", 0, position))
            continue
        component: Component = "system" if is_system(message) else "history"
        out.append((component, counters[component], position))
        counters[component] += 1
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
