"""Which format a request body is, told from its keys and message shapes alone.

Kept apart from the formats themselves (which load pydantic and build their body models) so that
detection imports nothing heavy and only the detected format's module is loaded. Each format's
``detect`` is the function here of its name, and :data:`DETECTORS` is the detection order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "CONTENT_FIELDS",
    "DETECTORS",
    "foreign_fields",
    "is_anthropic",
    "is_openai",
    "is_question",
    "is_responses",
]

# Content parts only Chat Completions has (an Anthropic body has image, document, tool_use, ...).
_OPENAI_PARTS = ("image_url", "input_audio", "file", "refusal")
_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "document", "image", "thinking", "redacted_thinking")


def _part_types(messages: list[Any]) -> set[str]:
    return {
        str(part.get("type"))
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for part in message["content"]
        if isinstance(part, dict)
    }


def _openai_tool(tool: Any) -> bool:
    """A Chat Completions tool: its definition under the key its type names (``{"type":
    "function", "function": {...}}``, ``{"type": "custom", "custom": {...}}``); a Messages tool
    has its fields at the top."""
    return (
        isinstance(tool, dict)
        and tool.get("type") in ("function", "custom")
        and isinstance(tool.get(tool["type"]), dict)
    )


def _looks_openai(request: Mapping[str, Any]) -> bool:
    """OpenAI markers that no Messages body has (a Claude model id may be sent in OpenAI shape):
    system, developer, tool or function roles, tool calls, OpenAI-only content parts, tools
    defined as Chat Completions defines them (an agent's first turn has no other marker)."""
    messages = request["messages"]
    for message in messages:
        if isinstance(message, dict) and (
            message.get("role") in ("system", "developer", "tool", "function")
            or "tool_calls" in message
            or "function_call" in message
        ):
            return True
    tools = request.get("tools")
    if isinstance(tools, list) and any(_openai_tool(tool) for tool in tools):
        return True
    return not _part_types(messages).isdisjoint(_OPENAI_PARTS)


def is_anthropic(request: Mapping[str, Any]) -> bool:
    """A ``messages`` body with no OpenAI marker and a top-level ``system``, content blocks of
    Anthropic types, or a Claude model (also behind a host prefix: ``us.anthropic.claude-...``,
    ``anthropic/claude-...``)."""
    if not isinstance(request.get("messages"), list):
        return False
    if _looks_openai(request):
        return False
    if "system" in request or "claude" in str(request.get("model", "")).lower():
        return True
    return not _part_types(request["messages"]).isdisjoint(_ANTHROPIC_BLOCKS)


def is_openai(request: Mapping[str, Any]) -> bool:
    """A ``messages`` body."""
    return isinstance(request.get("messages"), list)


def is_responses(request: Mapping[str, Any]) -> bool:
    """An ``input`` body (a string or a list), or one with no input whose stored ``prompt`` (an
    object), ``previous_response_id`` or ``conversation`` supplies it, with no chat ``messages``."""
    if "messages" in request:
        return False
    if "input" in request:
        return isinstance(request["input"], str | list)
    if is_question(request):
        return False
    return isinstance(request.get("prompt"), dict) or any(
        request.get(field) is not None for field in ("previous_response_id", "conversation")
    )


def is_question(request: Mapping[str, Any]) -> bool:
    """A body with ``questions`` or ``documents`` and no chat ``messages``."""
    return "messages" not in request and any(k in request for k in ("questions", "documents", "role"))


# Detection order matters: Anthropic bodies are also ``messages`` bodies.
DETECTORS: tuple[tuple[str, Callable[[Mapping[str, Any]], bool]], ...] = (
    ("anthropic", is_anthropic),
    ("openai", is_openai),
    ("responses", is_responses),
    ("question", is_question),
)


# The top-level fields each format reads as content (what its rendering counts). Other fields
# (``model``, ``max_tokens``, ``metadata``, ``stream``, ...) carry no content and pass through.
CONTENT_FIELDS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"messages", "system", "tools"}),
    "openai": frozenset({"messages", "tools", "functions", "response_format", "prediction"}),
    "responses": frozenset({"input", "instructions", "tools"}),
    "question": frozenset(
        {
            "role",
            "questions",
            "documents",
            "history",
            "instructions",
            "examples",
            "context",
            "goals",
            "expectJson",
        }
    ),
}


# The fields that are a request's content in one format and no provider's extra in another. The
# question format's other fields (``documents``, ``context``, ``history``, ...) are also extras
# that OpenAI-compatible servers accept on chat bodies (vLLM's ``documents`` for RAG templates):
# they are not held against a chat body.
PRIMARY_FIELDS = frozenset({"messages", "system", "input", "questions"})


def foreign_fields(name: str, request: Mapping[str, Any]) -> dict[str, list[str]]:
    """The primary content fields of ``request`` (anything but null, false or empty) that the
    format ``name`` does not read but another format does, each with the formats that read it:
    that content would go uncounted and untrimmed."""
    own = CONTENT_FIELDS[name]
    return {
        field: [other for other, fields in CONTENT_FIELDS.items() if field in fields]
        for field, value in request.items()
        if field in PRIMARY_FIELDS and field not in own and value not in (None, False, "", [], {})
    }
