"""Reading and adjusting the client's request bodies: the session, the question, the reply size,
cache marks, and the usage an OpenAI stream is asked for."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from typing import Any

from ..assembly import Policy, thinking_within
from ..catalog.values import ModelSpec
from ..errors import InvalidRequestError
from ..fitting import BODY_OUTPUT_FIELDS
from ..formats.anthropic_rules import without_cache_marks
from ..formats.jsonvalue import compact_json
from ..session import name_problem
from .providers import Provider
from .refusals import Refusal

__all__ = [
    "capped_output",
    "conversation",
    "encoded",
    "filled_output",
    "has_cache_control",
    "header_value",
    "last_user_text",
    "named_session",
    "session_id",
    "with_stream_usage",
    "with_system_breakpoint",
    "without_tool_marks",
]

HEADER = "header X-Ctxbudget-Session"


def conversation(body: Mapping[str, Any]) -> list[Any]:
    """The body's messages: a chat body's ``messages``, a Responses body's ``input`` (a string
    input is one user message)."""
    given = body.get("input")
    if "messages" not in body and isinstance(given, str):
        return [{"role": "user", "content": given}]
    if "messages" not in body and isinstance(given, list):
        return given
    messages = body.get("messages")
    return messages if isinstance(messages, list) else []


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last user message that asks something (the turn's question), "" when
    there is none. An Anthropic user message of tool results alone answers tool calls: an agent
    loop's turn was stored with a blank question (its blocks have no text)."""
    for message in reversed(conversation(body)):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            parts = [p for p in content or [] if isinstance(p, dict)]
            if parts and all(p.get("type") == "tool_result" for p in parts):
                continue
            return " ".join(str(p["text"]) for p in parts if isinstance(p.get("text"), str))
    return ""


def encoded(body: Mapping[str, Any]) -> bytes:
    """The bytes sent upstream for ``body``: compact UTF-8 JSON, a non-English text not escaped to
    six bytes a character (:func:`~ctxbudget.formats.jsonvalue.compact_json`: one writer, so one
    body is always the same bytes, and a cached prefix with them)."""
    return compact_json(body).encode("utf-8")


def session_id(given: str | None, provider: Provider, body: Mapping[str, Any]) -> str:
    """The session the request belongs to: the one the client named (``given``, see
    :func:`named_session`), else one derived from what stays the same across a conversation
    (model, system prompt, instructions or system messages, first user message; cache marks aside).
    A Responses conversation that goes on by ``previous_response_id`` sends only its new turn:
    name its session."""
    if given is not None:  # a blank name is refused there, not taken for no name
        return named_session(given)
    messages = [m for m in conversation(body) if isinstance(m, dict)]
    first_user = next((m for m in messages if m.get("role") == "user"), {})
    system = body.get("instructions") if provider.input_format == "responses" else body.get("system")
    # A Chat Completions or Responses body carries its system prompt as messages: two conversations
    # that differ only there were one session. (Appended only when present: the ids of bodies
    # without such messages are unchanged.)
    leading = list(itertools.takewhile(lambda m: m.get("role") != "user", messages))
    prompts = [m for m in leading if m.get("role") in ("system", "developer")]
    parts = [provider.input_format, body.get("model"), system, first_user, *([prompts] if prompts else [])]
    stable = json.dumps(_unmarked(parts), sort_keys=True, default=str)
    return "auto-" + hashlib.sha256(stable.encode("utf-8")).hexdigest()[:16]


def _unmarked(value: Any) -> Any:
    """``value`` as a conversation keeps it from turn to turn: without cache marks, which a client
    moves to its newest message each turn, and a content of text blocks only as its text (the
    message marked as newest in turn 1 is often a string again in turn 2). With them, each turn of
    one conversation derived a session of its own."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if not isinstance(value, list):
        return value
    unmarked = [_unmarked(v) for v in value]
    texts = [
        b.get("text")
        for b in unmarked
        if isinstance(b, dict) and set(b) == {"type", "text"} and b["type"] == "text"
    ]
    return "\n\n".join(map(str, texts)) if unmarked and len(texts) == len(unmarked) else unmarked


def named_session(header: str) -> str:
    """The session a client named in ``X-Ctxbudget-Session``, as it wrote it: the header's bytes
    (which the server hands over as Latin-1) read as UTF-8. A name that is not UTF-8, or that
    :func:`~ctxbudget.session.store.name_problem` refuses, is refused, never cut or altered: two
    different names must never become one session."""
    raw = header.encode("latin-1", errors="replace")
    try:
        # only HTTP's own blanks around a value are not part of it: a Unicode space left at an
        # edge (`matter-42\u3000`) is the name's, and name_problem refuses it (it prints as
        # `matter-42`); inside a name it is a character of it
        name = raw.decode("utf-8").strip(" \t")
    except UnicodeDecodeError as exc:
        raise InvalidRequestError("is not UTF-8 text", HEADER) from exc
    problem = name_problem(name)
    if problem is not None:
        raise InvalidRequestError(problem, HEADER)
    return name


def header_value(name: str) -> str:
    """A session name as a response header: its UTF-8 bytes (the server writes header values as
    Latin-1), so the client reads back the bytes it sent."""
    return name.encode("utf-8").decode("latin-1")


def has_cache_control(value: Any) -> bool:
    """Whether the client marked any cache breakpoint (a ``cache_control`` object, not text
    mentioning one, nor a ``null`` one)."""
    if isinstance(value, Mapping):
        return isinstance(value.get("cache_control"), Mapping) or any(
            has_cache_control(v) for v in value.values()
        )
    if isinstance(value, list):
        return any(has_cache_control(v) for v in value)
    return False


def with_system_breakpoint(body: dict[str, Any], tokens: int, spec: ModelSpec | None) -> dict[str, Any]:
    """Mark the end of a cacheable system prompt when the client marked nothing itself."""
    system = body.get("system")
    if spec is None or spec.cache.mode != "explicit" or not system or has_cache_control(body):
        return body
    if tokens < spec.cache.min_cacheable_tokens:
        return body
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": system}] if isinstance(system, str) else [dict(b) for b in system]
    )
    # the last block that takes a mark: the API refuses one on an empty text block
    takes = [n for n, b in enumerate(blocks) if b.get("type") != "text" or b.get("text")]
    if not takes:
        return body
    blocks[takes[-1]] = {**blocks[takes[-1]], "cache_control": {"type": "ephemeral"}}
    return {**body, "system": blocks}


def capped_output(body: dict[str, Any], policy: Policy) -> dict[str, Any]:
    """A reply size above the policy's ``max_output_tokens`` is lowered to it: the policy prices
    and budgets the reply. Anthropic's thinking budget is part of that reply and is lowered with
    it (:func:`ctxbudget.assembly.thinking_within`), or refused (400) when it cannot be."""
    cap = policy.max_output_tokens
    for name in BODY_OUTPUT_FIELDS:
        asked = body.get(name)
        if isinstance(asked, int) and not isinstance(asked, bool) and asked > cap:
            body = _thinking_within(body, name, asked, cap)
    return body


def filled_output(body: dict[str, Any], name: str, cap: int) -> dict[str, Any]:
    """``body`` with the reply size the client left open set to the policy's ``cap`` (as it is
    priced), the thinking budget below it."""
    return _thinking_within(body, name, None, cap)


def _thinking_within(body: dict[str, Any], name: str, asked: int | None, cap: int) -> dict[str, Any]:
    try:
        return thinking_within({**body, name: cap}, asked, cap)
    except InvalidRequestError as exc:
        raise Refusal(400, f"ctxbudget: {exc}", "invalid_request") from exc


def without_tool_marks(body: dict[str, Any]) -> dict[str, Any]:
    """Tool definitions without the client's cache marks."""
    tools = body.get("tools")
    if not isinstance(tools, list) or not any(isinstance(t, dict) and "cache_control" in t for t in tools):
        return body
    return {**body, "tools": without_cache_marks(tools)}


def with_stream_usage(provider: Provider, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """An OpenAI chat stream asks for usage (so the turn can be recorded) when the client did not
    (a Responses stream ends with its usage)."""
    if provider.input_format != "openai" or not body.get("stream"):
        return body, False
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise Refusal(400, "ctxbudget: $.stream_options must be an object", "invalid_request")
    if isinstance(options, dict) and options.get("include_usage"):
        return body, False
    return {**body, "stream_options": {**(options or {}), "include_usage": True}}, True
