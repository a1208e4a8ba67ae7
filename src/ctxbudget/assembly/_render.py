"""Rendering assembled blocks to an Anthropic Messages body, an OpenAI Chat body, or plain text.

Stable content comes first: system blocks hold the cached tiers in policy order; messages hold
the rolling history and, last, the current turn. Anthropic breakpoints become ``cache_control``
marks on their blocks (``"ttl": "1h"`` for one-hour entries).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..cache import Block, Breakpoint
from ..formats.anthropic_rules import THINKING, content_blocks, merged_turns, nested_blocks

__all__ = ["OutputFormat", "block_texts", "content_width", "render_blocks", "takes_mark"]

OutputFormat = Literal["anthropic", "openai", "text"]
CONTINUATION = "[The conversation so far continues below.]"


def _cache_control(point: Breakpoint) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": "1h"} if point.ttl == "1h" else {"type": "ephemeral"}


def _without_marks(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a provider message without cache marks, however deep they sit (a tool result's
    blocks, a search result's or a document's inside it, a web fetch's document): breakpoints are
    the plan's to set (the API takes 4 at most)."""
    out = copy.deepcopy(dict(message))
    for block in nested_blocks(out.get("content")):
        block.pop("cache_control", None)
    return out


def takes_mark(block: Block) -> bool:
    """Whether a block's rendering carries a cache mark: its text does; a provider message sent
    as it was does when it holds a block other than thinking or empty text (:func:`_mark`)."""
    if block.message is None:
        return True
    return any(map(_takes_a_mark, content_blocks(block.message.get("content"))))


def content_width(block: Block) -> int:
    """The content blocks a block is sent as: its text one, a provider message its own (an
    assistant turn of three tool calls is three), which the provider's cache lookback counts."""
    return 1 if block.message is None else max(1, len(content_blocks(block.message.get("content"))))


def _mark(message: dict[str, Any], point: Breakpoint) -> None:
    """A cache mark on a provider message's last block that takes one (not a thinking block)."""
    blocks = content_blocks(message.get("content"))
    for block in reversed(blocks):
        if _takes_a_mark(block):
            block["cache_control"] = _cache_control(point)
            message["content"] = blocks
            return


def _takes_a_mark(part: Any) -> bool:
    """Whether a content block may carry a cache mark: the API refuses one on thinking, and on an
    empty text block (an image pasted with no text), which it otherwise takes."""
    if not isinstance(part, dict) or part.get("type") in THINKING:
        return False
    return part.get("type") != "text" or bool(part.get("text"))


def _append(messages: list[dict[str, Any]], message: dict[str, Any], parts: bool) -> None:
    """Add a message; in Anthropic bodies (``parts``) a message of the same role as the one before
    is merged into it, as the API combines them (:func:`merged_turns`)."""
    if parts and messages and messages[-1]["role"] == message["role"]:
        messages[-1] = merged_turns(messages[-1], message)
    else:
        messages.append(message)


def _messages(blocks: Sequence[Block], marks: dict[int, Breakpoint], parts: bool) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    as_given: list[bool] = []  # per message: a provider message sent as it was
    for i, block in enumerate(blocks):
        if block.region != "message":
            continue
        if block.message is not None:
            message = _without_marks(block.message) if parts else copy.deepcopy(dict(block.message))
            if i in marks and parts:
                _mark(message, marks[i])
            count = len(messages)
            _append(messages, message, parts)
            as_given[count:] = [True] * (len(messages) - count)
            continue
        part: dict[str, Any] = {"type": "text", "text": block.text}
        if i in marks:
            part["cache_control"] = _cache_control(marks[i])
        if messages and messages[-1]["role"] == block.role and (parts or not as_given[-1]):
            messages[-1]["content"] = [*content_blocks(messages[-1]["content"]), part]
        else:
            messages.append({"role": block.role, "content": [part]})
            as_given.append(False)
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUATION}]})
        as_given.insert(0, False)
    if not parts:
        for message, given in zip(messages, as_given, strict=True):
            if not given:
                message["content"] = "\n\n".join(p["text"] for p in message["content"])
    return messages


def _anthropic(
    blocks: Sequence[Block], marks: dict[int, Breakpoint], model: str, max_tokens: int
) -> dict[str, Any]:
    system = []
    for i, block in enumerate(blocks):
        if block.region == "system":
            entry: dict[str, Any] = {"type": "text", "text": block.text}
            if i in marks:
                entry["cache_control"] = _cache_control(marks[i])
            system.append(entry)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if system:  # no system prompt at all rather than an empty one
        body["system"] = system
    return {**body, "messages": _messages(blocks, marks, True)}


def _openai(
    blocks: Sequence[Block], model: str, max_tokens: int, prompt_cache_key: str | None
) -> dict[str, Any]:
    system = [{"type": "text", "text": b.text} for b in blocks if b.region == "system"]
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    body: dict[str, Any] = {
        "model": model,
        "max_completion_tokens": max_tokens,
        "messages": messages + _messages(blocks, {}, False),
    }
    if prompt_cache_key:
        body["prompt_cache_key"] = prompt_cache_key
    return body


def _text(blocks: Sequence[Block]) -> str:
    parts = []
    for block in blocks:
        header = f"[{block.tier}]" if block.region == "system" else f"[{block.role}]"
        parts.append(f"{header}\n{block.text}")
    return "\n\n".join(parts) + "\n"


def render_blocks(
    blocks: Sequence[Block],
    breakpoints: Sequence[Breakpoint],
    fmt: OutputFormat,
    *,
    model: str,
    max_tokens: int,
    prompt_cache_key: str | None = None,
) -> dict[str, Any] | str:
    """The body to send in ``fmt`` (a dict for the APIs, a string for ``text``)."""
    marks = {p.block: p for p in breakpoints if p.explicit}
    if fmt == "anthropic":
        return _anthropic(blocks, marks, model, max_tokens)
    if fmt == "openai":
        return _openai(blocks, model, max_tokens, prompt_cache_key)
    return _text(blocks)


def block_texts(body: dict[str, Any] | str) -> list[str]:
    """Every text the provider will read in a rendered body (for the verbatim check)."""
    if isinstance(body, str):
        return [body]
    texts = [b["text"] for b in body.get("system", []) if isinstance(b, dict)]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return texts
