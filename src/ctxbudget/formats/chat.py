"""What the OpenAI and Anthropic chat formats share: splitting messages into the four components.

Leading system messages are the system prompt; the latest user turn (a user message that does
not only carry tool results) is the query, wherever it stands; every other message is history.
A tool call and its results form one group, so trimming keeps or drops them together.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..items import GAP, PIECE_SEP, PLACEHOLDER_TEMPLATE, Component, Item, Plan

__all__ = [
    "Location",
    "apply_history",
    "content_pieces",
    "content_text",
    "items_from_messages",
    "plain_chat",
    "split_messages",
    "text_locations",
    "text_part_indexes",
    "with_content_text",
]


def text_part_indexes(content: Any) -> dict[int, int]:
    """Positions of the ``{"type": "text"}`` parts (OpenAI) or blocks (Anthropic) of a content
    list, in order, each with its rank among them (a mapping: a list's ``in`` and ``index`` made
    a body of many parts quadratic, 1.2 MB of tiny system blocks took 15 s)."""
    if not isinstance(content, list):
        return {}
    positions = (i for i, part in enumerate(content) if isinstance(part, dict) and part.get("type") == "text")
    return {position: rank for rank, position in enumerate(positions)}


Location = tuple[str | int, ...]


def plain_chat(request: Mapping[str, Any], roles: frozenset[str], keys: frozenset[str]) -> bool:
    """Whether ``request`` is a body of plain messages only, which its format's pydantic model
    (``formats.*_wire``) is sure to accept: a dict whose ``messages`` is a non-empty list of dicts,
    each with a role of ``roles``, a string content, and no field outside ``keys`` (``role``,
    ``content`` and fields whose value, when given, must be a string). The body's own fields are
    the caller's to check. Such a body skips the model: pydantic's import and the models' build
    (the first fit of a 2,000-message chat in a fresh process, bench/bench_history.py: 114 ms
    before, 67 ms after) and its validation (those 2,000 messages: 1.1 ms, this check 0.3 ms).
    Anything else is validated by the model, which gives the error; a property test holds this
    function to it (tests/test_plain_chat.py)."""
    messages = request.get("messages")
    if type(request) is not dict or type(messages) is not list or not messages:
        return False
    for message in messages:
        if type(message) is not dict or "content" not in message or not message.keys() <= keys:
            return False
        for value in message.values():  # the role too: a str subclass is left to the model
            if type(value) is not str:
                return False
        if message.get("role") not in roles:
            return False
    return True


def _block_texts(block: Any, at: Location) -> list[tuple[Location, str]]:
    """The texts of one part or block: a text part, a text document's data, a tool result's text
    (a string, or text and text-document sub-blocks)."""
    if not isinstance(block, dict):
        return []
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return [((*at, "text"), block["text"])]
    if kind == "document" and isinstance(block.get("source"), dict):
        source = block["source"]
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return [((*at, "source", "data"), source["data"])]
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, str):
            return [((*at, "content"), inner)]
        if isinstance(inner, list):
            return [found for j, sub in enumerate(inner) for found in _block_texts(sub, (*at, "content", j))]
    return []


def text_locations(content: Any) -> list[tuple[Location, str]]:
    """Every text a content carries, in order, with where it sits: the string itself, text parts
    or blocks, text ``document`` sources, and the text of Anthropic ``tool_result`` blocks (a
    string, or text and text-document sub-blocks). Each is a piece of the message's trimmable
    text; a format's rendering marks exactly these as the item's content."""
    if isinstance(content, str):
        return [((), content)]
    if not isinstance(content, list):
        return []
    return [found for i, part in enumerate(content) for found in _block_texts(part, (i,))]


def content_pieces(content: Any) -> list[str]:
    """The texts of a content (see :func:`text_locations`), in order."""
    return [text for _, text in text_locations(content)]


def content_text(content: Any) -> str:
    """The trimmable text of a content: its pieces joined by :data:`PIECE_SEP` (``""`` if none)."""
    if type(content) is str:  # the common message: one piece, itself
        return content
    return PIECE_SEP.join(content_pieces(content))


def with_content_text(message: Mapping[str, Any], text: str, pieces: tuple[str, ...] = ()) -> dict[str, Any]:
    """A deep copy of ``message`` whose texts are ``pieces`` (one per location, each in its place;
    every other field kept). Without pieces, ``text`` goes to the first location and any other
    is emptied."""
    out = copy.deepcopy(dict(message))
    locations = [location for location, _ in text_locations(out.get("content"))]
    if not locations:
        return out
    if len(pieces) != len(locations):
        pieces = (text,) + ("",) * (len(locations) - 1)
    originals = [original for _, original in text_locations(out.get("content"))]
    emptied: list[Location] = []
    marked: list[int] = []  # plain text parts cut to nothing, each standing for a marker
    for location, piece, original in zip(locations, pieces, originals, strict=True):
        if not piece and original:
            if _inside_result(location):
                emptied.append(location)  # dropped below: a result needs no empty text block
                continue
            if location[1:] == ("content",) and _is_error(out["content"][location[0]]):
                piece = GAP.strip()  # an error result's content may not be empty
            if location[-1:] in (("text",), ("data",)):
                # A text block or document cut to nothing says that it was cut (the Messages API
                # refuses empty text there); a string content (a message's, a result's) may be empty.
                piece = GAP.strip()
                part = location[0]
                if (
                    location[1:] == ("text",)
                    and isinstance(part, int)
                    and set(out["content"][part]) <= {"type", "text"}
                ):
                    marked.append(part)
        _put(out, location, piece)
    _drop_emptied(out, emptied)
    _one_marker_a_run(out, marked)
    return out


def _one_marker_a_run(message: dict[str, Any], marked: list[int]) -> None:
    """Of plain text parts cut to nothing that stand next to each other, the first keeps the
    marker and the others go: a marker a part left a message of 400 short parts at 400 tokens
    whatever its budget (and refused as too large)."""
    for later, earlier in sorted(zip(marked[1:], marked, strict=False), reverse=True):
        if later == earlier + 1:
            del message["content"][later]


def _inside_result(location: Location) -> bool:
    """A sub-block of a tool result's content list: ``(i, "content", j, ...)``."""
    return len(location) > 3 and location[1] == "content"


def _put(message: dict[str, Any], location: Location, piece: str) -> None:
    if location == ():
        message["content"] = piece
        return
    target = message["content"]
    for step in location[:-1]:
        target = target[step]
    target[location[-1]] = piece


def _drop_emptied(message: dict[str, Any], emptied: list[Location]) -> None:
    """Remove the result sub-blocks whose text was cut to nothing; a result left with no block
    gets an empty string (the gap marker when it is an error: it may not be empty)."""
    for i, j in sorted({(loc[0], loc[2]) for loc in emptied}, reverse=True):
        result = message["content"][i]
        del result["content"][j]
        if not result["content"]:
            result["content"] = GAP.strip() if _is_error(result) else ""


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def _copy(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as a new dict that shares nothing mutable with the caller's: a plain message
    (its values strings, numbers or null, most of a long chat) is copied flat, anything else deep
    (a deep copy of each kept message was a tenth of a long history's fit)."""
    if all(type(value) in _IMMUTABLE for value in message.values()):
        return dict(message)
    return copy.deepcopy(dict(message))


def _is_error(block: Any) -> bool:
    """An Anthropic tool result flagged as an error: the Messages API refuses its content empty."""
    return isinstance(block, dict) and block.get("type") == "tool_result" and bool(block.get("is_error"))


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
    made = Item.of_message
    return tuple(
        made(
            component,
            index,
            f"$.messages[{position}]",
            text_of(messages[position]),
            str(messages[position].get("role", "")),
            groups[position],
        )
        for component, index, position in layout
    )


def apply_history(
    messages: Sequence[Mapping[str, Any]],
    layout: list[tuple[Component, int, int]],
    items: tuple[Item, ...],
    plan: Plan,
    replace_text: Callable[[Mapping[str, Any], str, tuple[str, ...]], dict[str, Any]],
    placeholder_role: str = "user",
) -> list[dict[str, Any]]:
    """The message list after the plan: kept or truncated messages and the history placeholder,
    one for each run of summarized messages (:func:`_placeholder_runs`), where the run began."""
    by_key = {item.key: item for item in items}
    runs = _placeholder_runs(layout, plan) if plan.placeholder_after is not None else {}
    out: list[dict[str, Any]] = []
    asked = False  # the query is out: a placeholder after it is an assistant note, not a user turn
    for slot, (component, index, position) in enumerate(layout):
        key = (component, index)
        asked = asked or component == "query"
        if slot in runs:
            text = PLACEHOLDER_TEMPLATE.format(omitted=runs[slot])
            out.append({"role": "assistant" if asked else placeholder_role, "content": text})
        if plan.kept(key):
            item = by_key[key]
            new_text = plan.text_of(item)
            message = messages[position]
            pieces = plan.pieces_of(item)
            changed = new_text != item.text or pieces
            out.append(replace_text(message, new_text, pieces) if changed else _copy(message))
    return out


def _placeholder_runs(layout: list[tuple[Component, int, int]], plan: Plan) -> dict[int, int]:
    """Where each run of summarized history messages begins (its slot in ``layout``) and how many
    it holds. The query ends a run: the tool steps an agent took after the question, summarized
    with the turns before it, were announced by one placeholder before the question, as if they
    had never been taken (an assistant note after it says so); a kept message ends one too."""
    runs: dict[int, int] = {}
    start = None
    for slot, (component, index, _) in enumerate(layout):
        decision = plan.decisions.get((component, index))
        if component == "history" and decision is not None and decision.action == "summarized":
            if start is None:
                start = slot
                runs[slot] = 0
            runs[start] += 1
        elif component == "query" or (component == "history" and plan.kept((component, index))):
            start = None
    return runs
