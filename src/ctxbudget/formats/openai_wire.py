"""OpenAI Chat Completions bodies as pydantic models: what :mod:`.openai` validates a body
against when :func:`.chat.plain_chat` cannot vouch for it (so a plain chat body never imports
pydantic; see there)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .wire import OpenModel

__all__ = ["Body", "FunctionParameters"]


class _Function(OpenModel):
    name: str
    arguments: str = ""


class _Custom(OpenModel):
    name: str
    input: str = ""


class _ToolCall(OpenModel):
    """A function call, or a custom (freeform) tool's call: ``{"type": "custom", "custom": ...}``."""

    id: str | None = None  # which a tool message's tool_call_id names
    type: str | None = None
    function: _Function | None = None
    custom: _Custom | None = None

    @model_validator(mode="after")
    def _has_its_call(self) -> _ToolCall:
        if self.type == "custom":
            if self.custom is None:
                raise ValueError("a custom tool call needs its `custom` object (name and input)")
        elif self.function is None:
            raise ValueError("a tool call needs its `function` (name and arguments)")
        return self


class _ImageURL(OpenModel):
    url: str
    detail: str | None = None


class _Part(OpenModel):
    type: str
    text: str | None = None
    image_url: _ImageURL | None = None

    @model_validator(mode="after")
    def _text_has_text(self) -> _Part:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part needs a string `text`")
        return self


class _Message(OpenModel):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[_Part] | None = None
    name: str | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="after")
    def _names_what_it_answers(self) -> _Message:
        # the API refuses either without it, and a fit cannot pair it with its call: kept apart
        # from it, it was sent after a placeholder, its call left unanswered
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a tool message needs its `tool_call_id` (the id of the call it answers)")
        if self.role == "function" and self.name is None:
            raise ValueError("a function message needs its `name` (the function whose call it answers)")
        return self


class _Property(OpenModel):
    type: str | list[str] | None = None
    description: str | None = None
    enum: list[Any] | None = None


class FunctionParameters(OpenModel):
    """A function tool's ``parameters`` as far as they are counted (also for Responses tools)."""

    # a property's schema, or a boolean one (JSON Schema's true / false: any value, or none)
    properties: dict[str, _Property | bool] | None = None


class _FunctionDef(OpenModel):
    name: str
    description: str | None = None
    parameters: FunctionParameters | None = None


class _CustomDef(OpenModel):
    name: str
    description: str | None = None


class _Tool(OpenModel):
    type: str | None = None
    function: _FunctionDef | None = None
    custom: _CustomDef | None = None


class _Prediction(OpenModel):
    content: str | list[dict[str, Any]] | None = None


class Body(OpenModel):
    messages: list[_Message] = Field(min_length=1)
    tools: list[_Tool] | None = None
    functions: list[_FunctionDef] | None = None  # the deprecated form of tools
    prediction: _Prediction | None = None
