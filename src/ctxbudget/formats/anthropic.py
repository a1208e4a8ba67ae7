"""Anthropic Messages bodies. No public tokenizer exists for Claude 3+, so counts are estimates.

The estimate tokenizes each text the provider will read (system text, message text, tool_use
names and inputs as JSON, tool_result content, tool definitions as JSON) with the proxy
encoding, adds 3 tokens of framing per message, and the caller applies the model family's
safety factor. Every field the library does not trim (``cache_control`` included) passes
through untouched: only the ``text`` of a trimmed block (or a string content) is replaced.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..items import Item, ItemKey, Owner, Plan, Rendering, Segment
from .anthropic_rules import (
    THINKING,
    alternate,
    has_thinking,
    never_empty,
)
from .chat import (
    apply_history,
    content_text,
    items_from_messages,
    plain_chat,
    split_messages,
    text_part_indexes,
    with_content_text,
)
from .detection import is_anthropic
from .media import anthropic_block_estimate, document_notes

__all__ = ["AnthropicFormat", "block_tokens"]

TOKENS_PER_MESSAGE = 3
_ROLES = frozenset({"user", "assistant"})
_PLAIN_KEYS = frozenset({"role", "content"})


def _validate(request: Mapping[str, Any]) -> None:
    """The body checked against its model (:mod:`.anthropic_wire`), unless it is plain chat the
    model is sure to accept (:func:`.chat.plain_chat`, a string system prompt or none)."""
    system = request.get("system")
    plain = (system is None or type(system) is str) and request.get("tools") is None
    if plain and request.get("cache_control") is None and plain_chat(request, _ROLES, _PLAIN_KEYS):
        return
    from .anthropic_wire import Body
    from .wire import validate_body

    validate_body(Body, request)


# A text block that is one tagged element, as agent harnesses add to the turns that return tool
# results (Claude Code's "<system-reminder>...</system-reminder>"): the harness speaking, not the user.
_HARNESS_NOTE = re.compile(r"\s*<([A-Za-z][\w.-]*)(?:\s[^>]*)?>.*</\1>\s*", re.DOTALL)


def _asks(message: Mapping[str, Any]) -> bool:
    """A user turn that says something of its own: not only tool results, with or without harness
    notes (a turn that returns results and asks a follow-up in a text block is the user's turn
    too; a turn with no result is the user's whatever its text looks like: a task in tags)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if not isinstance(content, list):
        return True
    results = [isinstance(b, dict) and b.get("type") == "tool_result" for b in content]
    if not any(results):
        return True
    return any(
        not (result or (isinstance(b, dict) and _note(b))) for b, result in zip(content, results, strict=True)
    )


def _note(block: Mapping[str, Any]) -> bool:
    """A text block that is a harness's note (:data:`_HARNESS_NOTE`) beside tool results."""
    text = block.get("text")
    return block.get("type") == "text" and isinstance(text, str) and _HARNESS_NOTE.fullmatch(text) is not None


def latest_user_turn(messages: Sequence[Any]) -> int | None:
    """Where the latest user turn that asks stands: the API strips the thinking blocks of the
    messages before it, which then count toward nothing (None: no such turn)."""
    return next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if isinstance(messages[i], Mapping) and _asks(messages[i])
        ),
        None,
    )


# Calls and what answers them: a client tool's tool_result, and a server or MCP tool's result
# block (``web_search_tool_result``, ``mcp_tool_result``, ...), which may come in the next
# assistant message when a long turn paused (``pause_turn``) and the client sent it back as two.
_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def _answers(block: Mapping[str, Any]) -> bool:
    kind = str(block.get("type", ""))
    return kind == "tool_result" or (kind.endswith("_tool_result") and "tool_use_id" in block)


def _tool_groups(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """A group per message; a call and its result share one, and so does everything from the
    first turn whose calls a result answers to that result (two assistant turns in a row whose
    calls one user turn answers are one unit; a server tool's call and its result in the next
    assistant message too)."""
    groups = list(range(len(messages)))
    owner_of_use: dict[str, int] = {}
    for i, message in enumerate(messages):
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        owners = [
            owner_of_use[str(b.get("tool_use_id"))]
            for b in blocks
            if _answers(b) and str(b.get("tool_use_id")) in owner_of_use
        ]
        for block in blocks:
            if block.get("type") in _CALLS:
                owner_of_use[str(block.get("id"))] = i
        if owners:
            first = min(owners)
            groups[first : i + 1] = [groups[first]] * (i + 1 - first)
    return groups


def _document_notes(block: Mapping[str, Any], owner: Owner) -> list[tuple[Segment, ...]]:
    return [(Segment(note, owner),) for note in document_notes(block)]


def _block_chunks(
    block: Mapping[str, Any], owner: Owner, content: bool, estimated: list[tuple[Owner, str]]
) -> tuple[list[tuple[Segment, ...]], int]:
    """The block's texts; with ``content``, its texts (see :func:`text_locations`) are the item's
    trimmable text. Images and PDFs add an estimate to ``estimated``."""
    estimate = anthropic_block_estimate(block)
    if estimate is not None:
        estimated.append((owner, f"{block.get('type')}: {estimate.how}: {estimate.tokens:,} tokens"))
        return _document_notes(block, owner), estimate.tokens
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return [(Segment(str(text or ""), owner, content=content and isinstance(text, str)),)], 0
    if kind == "tool_use":
        payload = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
        return [(Segment(str(block.get("name", "")), owner),), (Segment(payload, owner),)], 0
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, str):
            return [(Segment(inner, owner, content=content),)], 0
        chunks: list[tuple[Segment, ...]] = []
        constant = 0
        for sub in inner if isinstance(inner, list) else []:
            sub_chunks, sub_constant = _block_chunks(sub, owner, content, estimated)
            chunks += sub_chunks
            constant += sub_constant
        return chunks, constant
    if kind == "document" and isinstance(block.get("source"), dict):
        source = block["source"]
        notes = _document_notes(block, owner)
        if source.get("type") == "text":
            data = source.get("data")
            return [(Segment(str(data or ""), owner, content=content and isinstance(data, str)),), *notes], 0
        return [(Segment(json.dumps(source.get("content"), ensure_ascii=False), owner),), *notes], 0
    other = json.dumps({k: v for k, v in block.items() if k != "cache_control"}, ensure_ascii=False)
    return [(Segment(other, owner),)], 0


def block_tokens(block: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """One content block's tokens as a fit counts them: its texts counted with ``count`` (a tool
    call's name and input, a tool result's content, ...), an image or a PDF by its estimate."""
    chunks, constant = _block_chunks(block, "block", False, [])
    return constant + sum(count(segment.text) for chunk in chunks for segment in chunk)


def _content_chunks(
    content: Any, owner: Owner, estimated: list[tuple[Owner, str]], earlier_turn: bool = False
) -> tuple[list[tuple[Segment, ...]], int]:
    """A message's texts, each a piece of its trimmable text; in an earlier turn (before the
    latest user turn) thinking blocks are not counted: the API strips them and they do not
    count toward the window."""
    if isinstance(content, str):
        return [(Segment(content, owner, content=True),)], 0
    chunks: list[tuple[Segment, ...]] = []
    constant = 0
    for block in content:
        if earlier_turn and isinstance(block, dict) and block.get("type") in THINKING:
            continue
        block_chunks, block_constant = _block_chunks(block, owner, True, estimated)
        chunks += block_chunks
        constant += block_constant
    return chunks, constant


def _query_position(layout: Sequence[tuple[Any, int, int]]) -> int | None:
    return next((position for component, _, position in layout if component == "query"), None)


class AnthropicFormat:
    """Messages API: ``{"model", "system", "messages": [...], "tools": [...]}``."""

    name = "anthropic"

    def detect(self, request: Mapping[str, Any]) -> bool:
        """A ``messages`` body with no OpenAI marker and a top-level ``system``, content blocks of
        Anthropic types, or a Claude model (:func:`.detection.is_anthropic`)."""
        return is_anthropic(request)

    def _messages(
        self, request: Mapping[str, Any], *, validate: bool = True
    ) -> tuple[list[dict[str, Any]], list[tuple[Any, int, int]], list[int]]:
        if validate:
            _validate(request)
        messages = list(request["messages"])
        groups = _tool_groups(messages)
        layout = split_messages(
            messages,
            is_system=lambda m: False,
            is_query=_asks,
        )
        query = _query_position(layout)
        if query is not None and any(has_thinking(m) for m in messages[query + 1 :]):
            # A current tool loop (everything after the latest user turn) with thinking is one
            # unit: its thinking blocks must go back unchanged, with the tool calls they led to.
            groups[query + 1 :] = [groups[query + 1]] * (len(messages) - query - 1)
        return messages, layout, groups

    def parse(self, request: Mapping[str, Any]) -> tuple[Item, ...]:
        """Items: the system prompt (string or each text block), history, the final user turn."""
        messages, layout, groups = self._messages(request)
        system = request.get("system")
        items: list[Item] = []
        if isinstance(system, str) and system:
            items.append(Item(component="system", index=0, path="$.system", text=system))
        elif isinstance(system, list):
            items += [
                Item(component="system", index=n, path=f"$.system[{i}]", text=str(system[i].get("text", "")))
                for n, i in enumerate(text_part_indexes(system))
            ]
        return (
            *items,
            *items_from_messages(messages, layout, lambda m: content_text(m.get("content")), groups),
        )

    def parse_and_render(self, request: Mapping[str, Any]) -> tuple[tuple[Item, ...], Rendering]:
        """:meth:`parse` then :meth:`render`."""
        return self.parse(request), self.render(request, trusted=True)  # parse validated it

    def render(self, request: Mapping[str, Any], *, trusted: bool = False) -> Rendering:
        """Texts the provider reads, one chunk each, with per-message framing."""
        messages, layout, _ = self._messages(request, validate=not trusted)
        chunks: list[tuple[Segment, ...]] = []
        constants: list[tuple[Owner, int]] = [("framing", TOKENS_PER_MESSAGE)]
        estimated: list[tuple[Owner, str]] = []
        system = request.get("system")
        if isinstance(system, str) and system:
            chunks.append((Segment(system, ("system", 0), content=True),))
        elif isinstance(system, list):
            texts = text_part_indexes(system)
            for i, block in enumerate(system):
                owner: Owner = ("system", texts[i]) if i in texts else "system blocks"
                block_chunks, constant = _block_chunks(block, owner, i in texts, estimated)
                chunks += block_chunks
                constants.append((owner, constant))
        query = _query_position(layout)
        for component, index, position in layout:
            earlier = query is not None and position < query
            message_chunks, constant = _content_chunks(
                messages[position]["content"], (component, index), estimated, earlier
            )
            chunks += message_chunks
            constants.append(((component, index), constant + TOKENS_PER_MESSAGE))
        if request.get("tools"):
            tools = json.dumps(request["tools"], ensure_ascii=False, separators=(",", ":"))
            chunks.append((Segment(tools, "tools"),))
        return Rendering(chunks=tuple(chunks), constants=tuple(constants), estimated=tuple(estimated))

    def apply(self, request: Mapping[str, Any], items: tuple[Item, ...], plan: Plan) -> dict[str, Any]:
        """New body: truncated system text, trimmed messages; all else untouched."""
        messages, layout, _ = self._messages(request, validate=False)
        out = dict(request)
        system = request.get("system")
        if isinstance(system, str) and ("system", 0) in plan.decisions:
            out["system"] = (
                plan.text_of(next(i for i in items if i.key == ("system", 0)))
                if plan.kept(("system", 0))
                else ""
            )
        elif isinstance(system, list):
            out["system"] = self._system_blocks(system, items, plan)
        kept = apply_history(messages, layout, items, plan, with_content_text)
        out["messages"] = alternate([never_empty(m) for m in kept])
        return out

    @staticmethod
    def _system_blocks(
        system: list[dict[str, Any]], items: tuple[Item, ...], plan: Plan
    ) -> list[dict[str, Any]]:
        texts = text_part_indexes(system)
        by_key = {item.key: item for item in items}
        out: list[dict[str, Any]] = []
        for i, block in enumerate(system):
            if i not in texts:
                out.append(copy.deepcopy(block))
                continue
            key: ItemKey = ("system", texts[i])
            if plan.kept(key):
                out.append({**copy.deepcopy(block), "text": plan.text_of(by_key[key])})
        return out
