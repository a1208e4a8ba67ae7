"""The tiered context request: ``{"items": [...]}`` at the boundary, ContextItem values inside.

Each item has an ``id``, a ``tier`` (a tier name of the policy or its index; omitted for the
current turn), a ``kind``, ``text`` or text ``content`` blocks, and optionally ``role``, ``score``,
``tags``, ``citation``, ``supersedes``, ``group`` and ``metadata``. Items without a tier are the
current turn (the question and the latest tool calls and results) and come last. The request may
carry ``confirm_evict`` (protected ids the user lets go) and ``issue_tags`` (the case's issues:
protected items with tags are selected by them).

The question, openai and anthropic formats map onto tiers by a default: the system prompt goes to
the first ``never`` tier, documents to the first ``compact`` tier, history to the first
``rolling`` tier, and the query to the current turn.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator, model_validator

from ..errors import InvalidRequestError
from ..formats import detect_format, get_format
from ..formats.jsonvalue import check_json_value, json_kind
from ..formats.wire import validate_body
from ._origins import chat_origin, message_position, question_origins
from ._policy import Policy, Tier

__all__ = ["ContextItem", "ContextRequest", "parse_context_request", "unneeded_confirmations"]

_new_object = object.__new__

Kind = Literal[
    "playbook",
    "instruction",
    "evidence",
    "document",
    "history",
    "ledger",
    "tool_call",
    "tool_result",
    "question",
]
CURRENT_KINDS = ("question", "tool_call", "tool_result")


class _TextBlock(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text"]
    text: str


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    tier: StrictStr | StrictInt | None = None
    kind: Kind
    text: str | None = None
    content: list[_TextBlock] | None = None
    role: Literal["user", "assistant"] | None = None
    score: float | None = None
    # factories, not literal defaults: pydantic deep-copies those for each item (250 copies a turn)
    tags: list[str] = Field(default_factory=list)
    citation: str | None = None
    supersedes: str | None = None
    group: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("tier", mode="before")
    @classmethod
    def _a_tier(cls, tier: Any) -> Any:
        """A name or a whole-number index: 1.0 or true was told "Input should be a valid string"."""
        if tier is not None and (isinstance(tier, bool) or not isinstance(tier, str | int)):
            raise ValueError("a tier is a name or a whole-number index")
        return tier

    @model_validator(mode="after")
    def _has_text(self) -> _Item:
        if (self.text is None) == (self.content is None):
            raise ValueError("give exactly one of `text` or `content` (a list of text blocks)")
        return self


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[_Item]
    confirm_evict: list[str] = Field(default_factory=list)
    issue_tags: list[str] | None = None
    session: str | None = None


@dataclass(frozen=True, kw_only=True)
class ContextItem:
    """One item of a tiered request; ``tier`` is None for the current turn."""

    id: str
    tier: Tier | None
    kind: str
    text: str
    position: int
    role: str = "user"
    score: float | None = None
    tags: tuple[str, ...] = ()
    citation: str | None = None
    supersedes: str | None = None
    # Items of one group (a conversation's turn) leave the rolling tier together.
    group: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # The provider message an item of a chat body stands for (sent as it was when kept), and its format.
    source: Mapping[str, Any] | None = None
    source_format: str | None = None
    # Where a question or chat body's item stands in that body, and its text: (path, text path).
    origin: tuple[str, str] | None = None

    @classmethod
    def of(
        cls,
        id: str,
        tier: Tier | None,
        kind: str,
        text: str,
        position: int,
        role: str,
        score: float | None,
        tags: tuple[str, ...],
        citation: str | None,
        supersedes: str | None,
        group: str | None,
        metadata: Mapping[str, Any],
        origin: tuple[str, str] | None,
    ) -> ContextItem:
        """The item as ``ContextItem(...)`` makes it (no source: a chat body's items get theirs
        by ``dataclasses.replace``), without the keyword ``__init__`` that sets each field of a
        frozen dataclass through ``object.__setattr__``: 0.6 against 2.0 us, an item a request
        parsed (every assembly, the next turn's too). The suite checks it sets every field."""
        made = _new_object(cls)
        made.__dict__.update(
            id=id,
            tier=tier,
            kind=kind,
            text=text,
            position=position,
            role=role,
            score=score,
            tags=tags,
            citation=citation,
            supersedes=supersedes,
            group=group,
            metadata=metadata,
            source=None,
            source_format=None,
            origin=origin,
        )
        return made

    @property
    def path(self) -> str:
        """JSON path of the item in the request as given (a chat body's ``$.messages[2]``)."""
        return self.origin[0] if self.origin else f"$.items[{self.position}]"

    @property
    def text_path(self) -> str:
        """JSON path of the item's text in the request as given."""
        return self.origin[1] if self.origin else f"$.items[{self.position}].text"


@dataclass(frozen=True)
class ContextRequest:
    """Items in request order, explicit confirmations to evict protected items, and the case's
    issue tags (protected items with tags are selected by them; None: all are)."""

    items: tuple[ContextItem, ...]
    confirm_evict: frozenset[str] = frozenset()
    issue_tags: frozenset[str] | None = None

    def in_tier(self, tier: Tier) -> list[ContextItem]:
        """Items of ``tier`` in request order."""
        return [i for i in self.items if i.tier is not None and i.tier.index == tier.index]

    @property
    def current(self) -> list[ContextItem]:
        """The current turn: items without a tier."""
        return [i for i in self.items if i.tier is None]


def unneeded_confirmations(request: ContextRequest) -> tuple[str, ...]:
    """A report warning for each ``confirm_evict`` id whose item is not in a protected tier: only
    a protected item waits for a confirmation to leave, so naming another changed nothing (a
    pinned item is never evicted, a compact or rolling tier's items leave by its own rule)."""
    notes = []
    for item in request.items:
        if item.id not in request.confirm_evict or (item.tier and item.tier.eviction == "protected"):
            continue
        where = (
            f"tier {item.tier.index} {item.tier.name} (eviction: {item.tier.eviction})"
            if item.tier
            else "the current turn, which is never evicted"
        )
        notes.append(
            f"confirm_evict names {item.id!r}, in {where}: only a protected tier's items wait for "
            "a confirmation to leave, so it changed nothing"
        )
    return tuple(notes)


def _role(item: _Item) -> str:
    if item.role:
        return item.role
    return "assistant" if item.kind == "tool_call" else "user"


def _from_items(
    body: Mapping[str, Any], policy: Policy, origins: Mapping[str, tuple[str, str]] | None = None
) -> ContextRequest:
    parsed = validate_body(_Request, body)
    counts = Counter(i.id for i in parsed.items)
    duplicates = sorted(i for i, n in counts.items() if n > 1)
    if duplicates:
        raise InvalidRequestError(f"item ids must be unique; repeated: {', '.join(duplicates)}", "$.items")
    unknown = sorted(set(parsed.confirm_evict) - counts.keys())
    if unknown:  # a typo would let nothing go, silently
        raise InvalidRequestError(f"names no item of the request: {', '.join(unknown)}", "$.confirm_evict")
    items: list[ContextItem] = []
    made = ContextItem.of
    for n, item in enumerate(parsed.items):
        tier = _tier_of(item, policy, n)
        text = item.text if item.text is not None else "\n".join(b.text for b in item.content or [])
        items.append(
            made(
                item.id,
                tier,
                item.kind,
                text,
                n,
                _role(item),
                item.score,
                tuple(item.tags),
                item.citation,
                item.supersedes,
                item.group,
                item.metadata,
                (origins or {}).get(item.id),
            )
        )
    _check_order(items)
    # an empty list names no issue to select by: every item stays (it dropped all tagged evidence)
    tags = frozenset(parsed.issue_tags) if parsed.issue_tags else None
    return ContextRequest(tuple(items), frozenset(parsed.confirm_evict), tags)


def _tier_of(item: _Item, policy: Policy, n: int) -> Tier | None:
    if item.tier is None:
        if item.kind not in CURRENT_KINDS:
            raise InvalidRequestError(
                f"{'an' if item.kind[0] in 'aeiou' else 'a'} {item.kind} item needs a tier; only {', '.join(CURRENT_KINDS)} items may omit it",
                f"$.items[{n}].tier",
            )
        return None
    try:
        tier = policy.get_tier(item.tier)
    except Exception as exc:
        raise InvalidRequestError(str(exc), f"$.items[{n}].tier") from exc
    if item.kind == "ledger" and tier.eviction != "rolling":
        raise InvalidRequestError(
            f"a ledger item belongs to a rolling tier, not {tier.name!r}", f"$.items[{n}].tier"
        )
    return tier


def _check_order(items: list[ContextItem]) -> None:
    seen_current = False
    for item in items:
        if item.tier is None:
            seen_current = True
        elif seen_current:
            raise InvalidRequestError("the current turn (items without a tier) must come last", item.path)


def _first(policy: Policy, eviction: str) -> Tier:
    found = policy.first_tier(eviction)
    if found is None:
        raise InvalidRequestError(
            f"policy {policy.name!r} has no {eviction!r} tier to map this format onto", "$"
        )
    return found


def _from_question(body: Mapping[str, Any], policy: Policy) -> list[dict[str, Any]]:
    get_format("question").parse(body)  # the format's own checks: errors name the field
    items: list[dict[str, Any]] = []
    if body.get("role"):
        items.append(
            {
                "id": "system",
                "tier": _first(policy, "never").name,
                "kind": "instruction",
                "text": body["role"],
            }
        )
    for n, doc in enumerate(body.get("documents") or []):
        items.append(
            {
                "id": f"document-{n}",
                "tier": _first(policy, "compact").name,
                "kind": "document",
                "text": doc.get("page_content", ""),
                "score": doc.get("score"),
            }
        )
    for n, message in enumerate(body.get("history") or []):
        role = "assistant" if message.get("role") == "assistant" else "user"
        items.append(
            {
                "id": f"history-{n}",
                "tier": _first(policy, "rolling").name,
                "kind": "history",
                "role": role,
                "text": message.get("content", ""),
            }
        )
    for n, question in enumerate(body.get("questions") or []):
        items.append({"id": f"question-{n}", "kind": "question", "text": question.get("text", "")})
    return items


def _has_tool_calls(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return bool(message.get("tool_calls")) or any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks
    )


def _is_tool_result(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return message.get("role") == "tool" or any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
    )


def _chat_kind(message: Mapping[str, Any], current: bool) -> str:
    """A message's item kind: tool calls and tool results by what they carry; in the current turn
    an assistant message is a tool call and anything else a tool result (only those may follow
    the question)."""
    if _has_tool_calls(message) or (current and message.get("role") == "assistant"):
        return "tool_call"
    if _is_tool_result(message) or current:
        return "tool_result"
    return "history"


# Blocks whose cost is not in a message's text: counted by their JSON (server tool calls and
# results, MCP blocks, ...). Text, tool results' texts, media and thinking are counted elsewhere.
_COUNTED_ELSEWHERE = frozenset({"text", "tool_result", "image", "document", "thinking", "redacted_thinking"})


def _chat_text(item_text: str, message: Mapping[str, Any]) -> str:
    """What a message costs, as text: its texts, its tool calls (function or custom) and every
    other block a model reads (tool_use, server tool and MCP blocks) by name and input."""
    calls = [
        json.dumps(c.get("function") or c.get("custom") or {}, ensure_ascii=False, sort_keys=True)
        for c in message.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    content = message.get("content")
    blocks = list(content) if isinstance(content, list) else []  # a copy: the caller's message stays as it is
    # a tool result's blocks that are not its text (a search result): the item's text leaves them out
    blocks += [
        inner
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("content"), list)
        for inner in b["content"]
    ]
    for block in blocks:
        if isinstance(block, dict) and block.get("type") not in _COUNTED_ELSEWHERE:
            shown = {k: v for k, v in block.items() if k not in ("cache_control", "id", "type")}
            calls.append(json.dumps(shown, ensure_ascii=False, sort_keys=True))
    return "\n".join([item_text, *calls]) if calls else item_text


def _from_chat(
    body: Mapping[str, Any], policy: Policy, fmt_name: str
) -> tuple[list[dict[str, Any]], dict[str, Mapping[str, Any]]]:
    """Items for a chat body, and the provider message behind each message item (by id): an
    assembly into the same format sends those messages as they were (tool calls, tool results,
    images, thinking blocks and every other field), choosing only which to keep."""
    parsed = get_format(fmt_name).parse(body)
    messages = body.get("messages") or []
    system: list[dict[str, Any]] = []  # instructions lead, wherever they stood
    items: list[dict[str, Any]] = []
    sources: dict[str, Mapping[str, Any]] = {}
    query_at = _answered_from(
        messages, next((message_position(i.path) for i in parsed if i.component == "query"), None)
    )
    for item in parsed:
        if item.component == "system":
            system.append(
                {
                    "id": f"system-{item.index}",
                    "tier": _first(policy, "never").name,
                    "kind": "instruction",
                    "text": item.text,
                    "_path": item.path,
                }
            )
            continue
        position = message_position(item.path)
        message = messages[position]
        current = query_at is not None and position >= query_at
        entry: dict[str, Any] = {
            "id": f"{item.component}-{item.index}",
            "kind": "question" if item.component == "query" else _chat_kind(message, current),
            "role": "assistant" if item.role == "assistant" else "user",
            "text": _chat_text(item.text, message),
            "_path": item.path,
        }
        if not current:
            entry["tier"] = _first(policy, "rolling").name
        items.append(entry)
        sources[entry["id"]] = message
    return system + items, sources


def _tool_ids(message: Mapping[str, Any], kind: str, field: str) -> set[str]:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return {str(b.get(field)) for b in blocks if isinstance(b, dict) and b.get("type") == kind}


def _answered_from(messages: Any, query_at: int | None) -> int | None:
    """Where the current turn starts: the query, or earlier when the query message (or one after
    it) answers a tool call made before it; that call then belongs to the current turn, so the
    rolling tier can never drop it and leave its result unpaired."""
    if query_at is None or not isinstance(messages, list):
        return query_at
    answered: set[str] = set()
    for message in messages[query_at:]:
        if isinstance(message, Mapping):
            answered |= _tool_ids(message, "tool_result", "tool_use_id")
            answered |= {str(message["tool_call_id"])} if message.get("tool_call_id") else set()
    start = query_at
    for at in range(query_at - 1, -1, -1):
        message = messages[at]
        if not isinstance(message, Mapping):
            continue
        calls = _tool_ids(message, "tool_use", "id") | {
            str(c.get("id")) for c in message.get("tool_calls") or [] if isinstance(c, Mapping)
        }
        if calls & answered:
            start = at
    return start


def parse_context_request(
    body: Mapping[str, Any], policy: Policy, format: str | None = None
) -> ContextRequest:
    """A context request from ``{"items": [...]}`` or from a question/openai/anthropic body."""
    if not isinstance(body, Mapping):
        raise InvalidRequestError(f"expected a JSON object, got {json_kind(body)}", "$")
    check_json_value(body)  # what fit refuses at the boundary (a lone surrogate, NaN, a huge int)
    if format in (None, "context") and "items" in body:
        return _from_items(body, policy)
    name = format or detect_format(body).name
    if name == "question":
        return _from_items({"items": _from_question(body, policy)}, policy, question_origins(body))
    if name == "context":
        raise InvalidRequestError("an items body needs its items list", "$.items")
    if name not in ("openai", "anthropic"):
        raise InvalidRequestError(
            f"assemble takes an items body, a question body, or a Chat Completions or Messages body; "
            f"this is a {name} body (fit it instead: ctxbudget fit)",
            "$",
        )
    items, sources = _from_chat(body, policy, name)
    origins = {i["id"]: chat_origin(i["_path"]) for i in items}
    request = _from_items(
        {"items": [{k: v for k, v in i.items() if k != "_path"} for i in items]}, policy, origins
    )
    with_sources = tuple(
        dataclasses.replace(i, source=sources[i.id], source_format=name) if i.id in sources else i
        for i in request.items
    )
    return dataclasses.replace(request, items=with_sources)
