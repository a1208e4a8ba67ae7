"""Request formats at the boundary: detection, parsing, rendering, rebuilding."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ..errors import ConfigError, InvalidRequestError
from ..items import RequestFormat
from .anthropic import AnthropicFormat
from .openai import OpenAIFormat
from .question import QuestionFormat
from .responses import ResponsesFormat

__all__ = ["FORMATS", "FormatName", "detect_format", "get_format"]

FormatName = Literal["question", "openai", "anthropic", "responses"]

# Detection order matters: Anthropic bodies are also ``messages`` bodies.
FORMATS: dict[str, RequestFormat] = {
    "anthropic": AnthropicFormat(),
    "openai": OpenAIFormat(),
    "responses": ResponsesFormat(),
    "question": QuestionFormat(),
}


def get_format(name: str) -> RequestFormat:
    """The format called ``name``; the error lists the known ones."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ConfigError(f"unknown format {name!r}; choose one of: {', '.join(sorted(FORMATS))}") from None


def detect_format(request: Mapping[str, Any]) -> RequestFormat:
    """The first format that recognizes ``request``."""
    if not isinstance(request, Mapping):
        raise InvalidRequestError(f"expected a JSON object, got {type(request).__name__}", "$")
    for fmt in FORMATS.values():
        if fmt.detect(request):
            return fmt
    raise InvalidRequestError(
        "cannot tell the request format: expected `messages` (openai, anthropic), `input` "
        "(responses) or `questions`/`documents` (question); name it with input_format=",
        "$",
    )
