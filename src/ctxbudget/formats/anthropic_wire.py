"""Anthropic Messages bodies as pydantic models: what :mod:`.anthropic` validates a body against
when :func:`.chat.plain_chat` cannot vouch for it (so a plain chat body never imports pydantic)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from .wire import OpenModel

__all__ = ["Body"]


class _Source(OpenModel):
    type: str
    data: str | None = None
    media_type: str | None = None


class _CacheControl(OpenModel):
    """A cache breakpoint as the Messages API takes one (it refuses any other type or lifetime)."""

    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class _CustomTool(OpenModel):
    """A tool the client defines and runs: ``{name, description?, input_schema, type?: "custom"}``."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any]
    cache_control: _CacheControl | None = None


class _TypedTool(OpenModel):
    """A tool of Anthropic's own, named by a versioned ``type`` (``web_search_20250305``,
    ``bash_20250124``, ...): its other fields are the tool's, and new ones keep coming, so only
    what every such tool shares is checked."""

    type: str
    name: str | None = None
    cache_control: _CacheControl | None = None

    @field_validator("type")
    @classmethod
    def _not_openai(cls, kind: str) -> str:
        if kind == "function":
            raise ValueError(
                "an OpenAI function tool ({type, function}) in a Messages body: give it as "
                "{name, description, input_schema}, or send the body as openai"
            )
        return kind


def _tool_kind(tool: Any) -> str:
    """A tool without a ``type`` (or ``"custom"``) is the client's; anything but an object is
    left to the custom model, whose error says an object was expected."""
    if isinstance(tool, dict) and tool.get("type") not in (None, "custom"):
        return "_typed"
    return "_custom"


# The tags begin with an underscore so that a path leaves them out (:mod:`..validation`).
_Tool = Annotated[
    Annotated[_CustomTool, Tag("_custom")] | Annotated[_TypedTool, Tag("_typed")],
    Discriminator(_tool_kind),
]


class _Block(OpenModel):
    type: str
    text: str | None = None
    id: str | None = None  # a tool_use's, which its tool_result names
    tool_use_id: str | None = None
    # A tool_result's content: a string, or blocks (text, image, ...); a server tool's result may
    # be an error object.
    content: str | list[_Block] | dict[str, Any] | None = None
    input: dict[str, Any] | None = None
    name: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None  # redacted_thinking
    # An image's or document's source; a search_result's source is its URL.
    source: _Source | str | None = None
    # A document's title and the context given with it (Anthropic refuses either unless a string).
    title: Any = None
    context: Any = None
    cache_control: _CacheControl | None = None

    @field_validator("title", "context")
    @classmethod
    def _document_notes_are_text(cls, value: Any, info: ValidationInfo) -> Any:
        if info.data.get("type") == "document" and value is not None and not isinstance(value, str):
            raise ValueError(f"a document block's `{info.field_name}` is a string")
        return value

    @model_validator(mode="after")
    def _text_has_text(self) -> _Block:
        if self.type == "text" and self.text is None:
            raise ValueError("a text block needs a string `text`")
        source = self.source
        if self.type in ("image", "document") and not isinstance(source, _Source):
            article = "an" if self.type[0] in "aeiou" else "a"
            raise ValueError(f"{article} {self.type} block needs a `source` object")
        if (
            self.type == "document"
            and isinstance(source, _Source)
            and source.type == "text"
            and source.data is None
        ):
            raise ValueError("a text document needs a string `source.data`")
        if self.type == "tool_result" and isinstance(self.content, dict):
            raise ValueError("a tool_result's content is a string or a list of blocks")
        # the API refuses either without its id, and a fit pairs a call and its result by it
        if self.type == "tool_use" and self.id is None:
            raise ValueError("a tool_use block needs its `id` (which its tool_result names)")
        if self.type == "tool_result" and self.tool_use_id is None:
            raise ValueError(
                "a tool_result block needs its `tool_use_id` (the id of the tool_use it answers)"
            )
        return self


class _Message(OpenModel):
    role: Literal["user", "assistant"]
    content: str | list[_Block]


class Body(OpenModel):
    system: str | list[_Block] | None = None
    messages: list[_Message] = Field(min_length=1)
    tools: list[_Tool] | None = None
    cache_control: _CacheControl | None = None  # automatic caching: the last block is marked
