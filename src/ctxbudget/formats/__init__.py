"""Request formats at the boundary: detection, parsing, rendering, rebuilding.

Each format's module (its pydantic body models included) is imported the first time the format is
looked up, so detecting and counting an OpenAI body loads neither the Anthropic, the Responses
nor the question format (and importing this package loads none).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, InvalidRequestError
from .detection import DETECTORS, foreign_fields
from .jsonvalue import json_kind, json_shown

if TYPE_CHECKING:
    from ..items import RequestFormat

__all__ = [
    "BODY_OUTPUT_FIELDS",
    "FORMATS",
    "FormatName",
    "check_reply_fields",
    "detect_format",
    "get_format",
    "resolve_format",
]

FormatName = Literal["question", "openai", "anthropic", "responses"]

# The fields a body asks for its reply's size by (Anthropic, OpenAI chat, either, Responses).
BODY_OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
# The provider formats whose bodies say whether the reply streams (``stream``), and how many
# replies an OpenAI chat body asks for (``n``).
_STREAMED_FORMATS = frozenset({"openai", "anthropic", "responses"})


def check_reply_fields(body: Mapping[str, Any], fmt: str) -> None:
    """A provider body's ``stream``, when given, is true or false, and an OpenAI chat body's ``n``
    a whole number of at least 1 (``3`` or ``3.0``), else an :class:`InvalidRequestError` naming
    the field: the provider refuses any other value, where a gateway answered ``"stream": "yes"``
    as a stream and priced ``"n": -1`` or ``"n": "3"`` as one reply. A question body's fields of
    those names are its own (passed through)."""
    if fmt not in _STREAMED_FORMATS:
        return
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequestError(f"must be true or false, got {json_shown(stream)}", "$.stream")
    n = body.get("n")
    if fmt != "openai" or n is None:
        return
    whole = isinstance(n, int) or (isinstance(n, float) and n.is_integer())
    if isinstance(n, bool) or not whole or n < 1:
        raise InvalidRequestError(
            f"must be a whole number of replies of at least 1, got {json_shown(n)}", "$.n"
        )


# Each format's module and class, in detection order (:data:`.detection.DETECTORS`).
_CLASSES = {
    "anthropic": ("anthropic", "AnthropicFormat"),
    "openai": ("openai", "OpenAIFormat"),
    "responses": ("responses", "ResponsesFormat"),
    "question": ("question", "QuestionFormat"),
}


class _Formats(Mapping[str, "RequestFormat"]):
    """The formats by name, each built (its module imported) on first lookup and then kept."""

    def __init__(self) -> None:
        self._built: dict[str, RequestFormat] = {}

    def __getitem__(self, name: str) -> RequestFormat:
        built = self._built.get(name)
        if built is None:
            module, cls = _CLASSES[name]
            built = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
            built = self._built.setdefault(name, built)
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(_CLASSES)

    def __len__(self) -> int:
        return len(_CLASSES)

    def __contains__(self, name: object) -> bool:
        return name in _CLASSES


# Detection order matters: Anthropic bodies are also ``messages`` bodies.
FORMATS: Mapping[str, RequestFormat] = _Formats()


def get_format(name: str) -> RequestFormat:
    """The format called ``name``; the error lists the known ones."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ConfigError(f"unknown format {name!r}; choose one of: {', '.join(sorted(FORMATS))}") from None


def detect_format(request: Mapping[str, Any], model: str | None = None) -> RequestFormat:
    """The first format that recognizes ``request`` (only that format's module is imported).
    ``model``, the id the request is fitted for, stands in for a body that names none: a plain
    ``messages`` body fitted for a Claude model is read as a Messages body (read as Chat
    Completions, its cut could open with an assistant turn, which the Messages API refuses)."""
    if not isinstance(request, Mapping):
        raise InvalidRequestError(f"expected a JSON object, got {json_kind(request)}", "$")
    probe = request if model is None or "model" in request else {**request, "model": model}
    for name, detects in DETECTORS:
        if detects(probe):
            return FORMATS[name]
    _misshapen_content(request)
    raise InvalidRequestError(
        "cannot tell the request format: expected `messages` (openai, anthropic), `input` "
        "(responses) or `questions`/`documents` (question); name it with input_format=",
        "$",
    )


def _misshapen_content(request: Mapping[str, Any]) -> None:
    """A body whose ``messages`` or ``input`` is there but of the wrong type is told so at that
    field (it read "cannot tell the request format ... expected `messages`", of a body that has
    them)."""
    for field, expected in (("messages", "a list of messages"), ("input", "a string or a list of items")):
        if field in request:
            raise InvalidRequestError(f"expected {expected}, got {json_kind(request[field])}", f"$.{field}")


def resolve_format(
    request: Mapping[str, Any], name: str | None = None, model: str | None = None
) -> RequestFormat:
    """The format called ``name``, else the detected one (``model``: see :func:`detect_format`); a
    body carrying content in fields that format does not read (a chat body given as ``question``,
    ``messages`` beside ``input``) is an :class:`InvalidRequestError` naming them: their content
    would go uncounted."""
    fmt = get_format(name) if name else detect_format(request, model)
    check_reply_fields(request, fmt.name)
    foreign = foreign_fields(fmt.name, request)
    if foreign:
        one = len(foreign) == 1
        owners = "; ".join(f"`{field}` is a field of {' and '.join(by)}" for field, by in foreign.items())
        raise InvalidRequestError(
            f"{', '.join(f'`{field}`' for field in foreign)} {'is' if one else 'are'} not read by the "
            f"{fmt.name} format the body was {'given as' if name else 'detected as'} ({owners}), so "
            f"{'its' if one else 'their'} content would not be counted; send the fields of one format "
            "only, or name the body's format with input_format=",
            "$",
        )
    return fmt
