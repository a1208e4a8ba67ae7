"""The Messages API's rules for a message list after a cut: a user message first, roles that
alternate (two turns of one role merge as the API merges them), every tool_result paired with the
tool_use just before it, no empty text, thinking blocks first in an assistant turn."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..items import GAP, PLACEHOLDER_TEMPLATE
from .chat import text_locations

__all__ = [
    "THINKING",
    "alternate",
    "content_blocks",
    "has_thinking",
    "merged_turns",
    "nested_blocks",
    "never_empty",
    "without_cache_marks",
]

THINKING = ("thinking", "redacted_thinking")


def has_thinking(message: Mapping[str, Any]) -> bool:
    """Whether an assistant turn carries thinking blocks (which a cut must keep first and whole)."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in THINKING for b in content
    )


def never_empty(message: dict[str, Any]) -> dict[str, Any]:
    """The Messages API refuses empty text: a text cut to nothing says that it was cut."""
    content = message.get("content")
    if content == "":
        return {**message, "content": GAP.strip()}
    if isinstance(content, list) and any(b.get("type") == "text" and b.get("text") == "" for b in content):
        blocks = [
            {**b, "text": GAP.strip()} if b.get("type") == "text" and b.get("text") == "" else b
            for b in content
        ]
        return {**message, "content": blocks}
    return message


def content_blocks(content: Any) -> list[Any]:
    """A message's content as a list of blocks (a string is one text block)."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def nested_blocks(value: Any) -> Iterator[Any]:
    """Every block in ``value`` and the blocks it holds, however deep, in order: a message's
    blocks, a tool result's, a document's own (``source.content``), and a server tool result's
    content held as one object (a web fetch's document). The blocks are the caller's own objects."""
    stack: list[Any] = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(reversed(value))
        elif isinstance(value, Mapping):
            yield value
            source = value.get("source")
            held = (value.get("content"), source.get("content") if isinstance(source, Mapping) else None)
            stack.extend(reversed([c for c in held if isinstance(c, list | Mapping)]))


def without_cache_marks(blocks: list[Any]) -> list[Any]:
    """The blocks (content blocks, tool definitions) without their ``cache_control`` marks."""
    return [
        {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in blocks
    ]


def _lead_first(blocks: list[Any], kinds: tuple[str, ...]) -> list[Any]:
    """``blocks`` with those of ``kinds`` moved to the front, each group in its order (parted in one
    pass: the rest was found by comparing each block with every lead one, and a user turn of
    20,000 tool results took 10 s to fit)."""
    lead: list[Any] = []
    rest: list[Any] = []
    for block in blocks:
        (lead if isinstance(block, dict) and block.get("type") in kinds else rest).append(block)
    return lead + rest


def merged_turns(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Two turns of one role as one, as the API combines them: tool results first in a user
    turn, thinking blocks first in an assistant turn, unless it opens with one already (thinking
    interleaved with tool calls, a paused turn sent back as two: each block stays where the model
    wrote it)."""
    kinds = ("tool_result",) if first.get("role") == "user" else THINKING
    blocks = content_blocks(first.get("content")) + content_blocks(second.get("content"))
    opens = bool(blocks) and isinstance(blocks[0], dict) and blocks[0].get("type") in THINKING
    return {**first, "content": blocks if kinds == THINKING and opens else _lead_first(blocks, kinds)}


def alternate(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the Messages API requires them after a cut: the first is a user message, and
    roles alternate. Two turns of one role in a row are merged (:func:`merged_turns`); a leading
    assistant message gets a user message before it."""
    gap = {"role": "user", "content": PLACEHOLDER_TEMPLATE.format(omitted="some")}
    out: list[dict[str, Any]] = []
    for message in _unpaired_as_text(messages):
        role = message.get("role")
        if not out and role == "assistant":
            out.append(dict(gap))
        elif out and out[-1].get("role") == role:
            out[-1] = merged_turns(out[-1], message)
            continue
        out.append(message)
    return _paired(out)


def _unpaired_as_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each tool result whose call is not in the last assistant turn before it
    (turns of one role in a row merge into one) made blocks of its user turn where it stands. Done
    before turns merge: merging puts tool results first, and a result whose call was cut, merged
    into the task's turn, was moved ahead of the task and the question it came with."""
    out: list[dict[str, Any]] = []
    asked: set[Any] = set()
    for message in messages:
        content = message.get("content")
        if message.get("role") == "assistant":  # assistant turns in a row merge: their calls too
            calls = _calls(content)
            asked = asked | calls if out and out[-1].get("role") == "assistant" else calls
        elif isinstance(content, list) and any(_orphan(b, asked) for b in content):
            message = {**message, "content": _with_orphans_as_text(content, asked)}
        out.append(message)
    return out


def _calls(content: Any) -> set[Any]:
    """The ids of the tool calls an assistant turn's ``content`` makes."""
    return {
        b.get("id") for b in content_blocks(content) if isinstance(b, dict) and b.get("type") == "tool_use"
    }


def _with_orphans_as_text(content: list[Any], asked: set[Any]) -> list[Any]:
    """``content`` with each tool result whose call is not among ``asked`` as blocks a user turn
    may hold (:func:`_unpaired`), where it stands."""
    return [c for b in content for c in (_unpaired(b) if _orphan(b, asked) else [b])]


def _orphan(block: Any, asked: set[Any]) -> bool:
    """Whether ``block`` is a tool result whose call is not among ``asked``."""
    return (
        isinstance(block, dict)
        and block.get("type") == "tool_result"
        and block.get("tool_use_id") not in asked
    )


def _paired(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tool_result whose tool_use is not in the assistant turn just before it (that turn was cut)
    becomes blocks of the user turn (:func:`_unpaired`): the API refuses an unpaired result."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            out.append(message)
            continue
        asked = _calls(out[-1].get("content")) if out and out[-1].get("role") == "assistant" else set()
        blocks = _lead_first(_with_orphans_as_text(content, asked), ("tool_result",))  # results first
        out.append({**message, "content": blocks} if blocks != content else message)
    return out


def _unpaired(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool result without its call as blocks a user turn may hold: a text block naming the call
    (and that it failed, for ``is_error``) with the result's text, then its blocks that are not
    text (an image, a PDF) as they were; the result's cache mark on the last of them."""
    text = "\n".join(t for _, t in text_locations([result]))
    failed = ", an error" if result.get("is_error") else ""
    head = {"type": "text", "text": f"[result of tool call {result.get('tool_use_id')}{failed}]\n{text}"}
    inner = result.get("content")
    others = (  # what that text does not hold already: images, PDFs (not text blocks or documents)
        [b for b in inner if isinstance(b, dict) and not text_locations([b])]
        if isinstance(inner, list)
        else []
    )
    blocks = [head, *others]
    if result.get("cache_control") is not None:
        blocks[-1] = {**blocks[-1], "cache_control": result["cache_control"]}
    return blocks
