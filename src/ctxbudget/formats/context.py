"""The tiered context request: ``{"items": [...]}`` at the boundary, ContextItem values inside.

Each item has an ``id``, a ``tier`` (a tier name of the policy or its index; omitted for the
current turn), a ``kind``, ``text`` or text ``content`` blocks, and optionally ``role``, ``score``,
``tags``, ``citation``, ``supersedes`` and ``metadata``. Items without a tier are the current turn
(the question and the latest tool calls and results) and come last.

The question, openai and anthropic formats map onto tiers by a default: the system prompt goes to
the first ``never`` tier, documents to the first ``compact`` tier, history to the first
``rolling`` tier, and the query to the current turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InvalidRequestError
from ..policy import Policy, Tier
from . import detect_format, get_format
from .wire import validate_body

__all__ = ["ContextItem", "ContextRequest", "parse_context_request"]

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
    tier: str | int | None = None
    kind: Kind
    text: str | None = None
    content: list[_TextBlock] | None = None
    role: Literal["user", "assistant"] | None = None
    score: float | None = None
    tags: list[str] = []
    citation: str | None = None
    supersedes: str | None = None
    metadata: dict[str, Any] = {}

    @model_validator(mode="after")
    def _has_text(self) -> _Item:
        if (self.text is None) == (self.content is None):
            raise ValueError("give exactly one of `text` or `content` (a list of text blocks)")
        return self


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[_Item]
    confirm_evict: list[str] = []
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
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        """JSON path of the item in the request."""
        return f"$.items[{self.position}]"


@dataclass(frozen=True)
class ContextRequest:
    """Items in request order, plus explicit confirmations to evict protected items."""

    items: tuple[ContextItem, ...]
    confirm_evict: frozenset[str] = frozenset()

    def in_tier(self, tier: Tier) -> list[ContextItem]:
        """Items of ``tier`` in request order."""
        return [i for i in self.items if i.tier is not None and i.tier.index == tier.index]

    @property
    def current(self) -> list[ContextItem]:
        """The current turn: items without a tier."""
        return [i for i in self.items if i.tier is None]


def _role(item: _Item) -> str:
    if item.role:
        return item.role
    return "assistant" if item.kind == "tool_call" else "user"


def _from_items(body: Mapping[str, Any], policy: Policy) -> ContextRequest:
    parsed = validate_body(_Request, body)
    ids = [i.id for i in parsed.items]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InvalidRequestError(f"item ids must be unique; repeated: {', '.join(duplicates)}", "$.items")
    items: list[ContextItem] = []
    for n, item in enumerate(parsed.items):
        tier = _tier_of(item, policy, n)
        text = item.text if item.text is not None else "\n".join(b.text for b in item.content or [])
        items.append(
            ContextItem(
                id=item.id,
                tier=tier,
                kind=item.kind,
                text=text,
                position=n,
                role=_role(item),
                score=item.score,
                tags=tuple(item.tags),
                citation=item.citation,
                supersedes=item.supersedes,
                metadata=item.metadata,
            )
        )
    _check_order(items)
    return ContextRequest(tuple(items), frozenset(parsed.confirm_evict))


def _tier_of(item: _Item, policy: Policy, n: int) -> Tier | None:
    if item.tier is None:
        if item.kind not in CURRENT_KINDS:
            raise InvalidRequestError(
                f"a {item.kind} item needs a tier; only {', '.join(CURRENT_KINDS)} items may omit it",
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
    for tier in policy.tiers:
        if tier.eviction == eviction:
            return tier
    raise InvalidRequestError(f"policy {policy.name!r} has no {eviction!r} tier to map this format onto", "$")


def _from_question(body: Mapping[str, Any], policy: Policy) -> list[dict[str, Any]]:
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


def _from_chat(body: Mapping[str, Any], policy: Policy, fmt_name: str) -> list[dict[str, Any]]:
    parsed = get_format(fmt_name).parse(body)
    items: list[dict[str, Any]] = []
    for item in parsed:
        if item.component == "system":
            items.append(
                {
                    "id": f"system-{item.index}",
                    "tier": _first(policy, "never").name,
                    "kind": "instruction",
                    "text": item.text,
                }
            )
        elif item.component == "history":
            role = "assistant" if item.role == "assistant" else "user"
            items.append(
                {
                    "id": f"history-{item.index}",
                    "tier": _first(policy, "rolling").name,
                    "kind": "history",
                    "role": role,
                    "text": item.text,
                }
            )
        elif item.component == "query":
            items.append({"id": f"question-{item.index}", "kind": "question", "text": item.text})
    return items


def parse_context_request(
    body: Mapping[str, Any], policy: Policy, format: str | None = None
) -> ContextRequest:
    """A context request from ``{"items": [...]}`` or from a question/openai/anthropic body."""
    if not isinstance(body, Mapping):
        raise InvalidRequestError(f"expected a JSON object, got {type(body).__name__}", "$")
    if format in (None, "context") and "items" in body:
        return _from_items(body, policy)
    name = format or detect_format(body).name
    if name == "question":
        return _from_items({"items": _from_question(body, policy)}, policy)
    return _from_items({"items": _from_chat(body, policy, name)}, policy)
