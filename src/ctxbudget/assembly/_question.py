"""The current turn's question checked before an assembly: there is one, and it sends something."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidRequestError
from ._origins import message_position
from ._render import OutputFormat
from ._request import ContextItem, ContextRequest

__all__ = ["check_question"]

_TEXT_PARTS = ("text", "input_text")


def check_question(parsed: ContextRequest, fmt: OutputFormat, request: Mapping[str, Any]) -> None:
    """Fail on an empty question (one with nothing to send as the user's turn of an ``fmt``
    body), and on a chat body with no current turn (a provider body needs the user's message)."""
    if not parsed.current and fmt != "text" and any(_from_chat(i) for i in parsed.items):
        raise InvalidRequestError(  # a chat body whose messages hold no user turn (a prefill alone)
            f"no user message to send as the current turn of an {fmt} body: end the messages with "
            'the user\'s message, or render with output format "text"',
            "$.messages",
        )
    if not parsed.current and fmt != "text":
        raise InvalidRequestError(
            f"there is no current turn to send as the user's message of an {fmt} body: end the items "
            'with the question (kind "question"), or render with output format "text"',
            "$.items",
        )
    for item in parsed.current:
        if item.kind == "question" and not item.text.strip():
            problem = _nothing_sent(item, fmt, request)
            if problem:
                raise InvalidRequestError(problem, item.text_path)


def _from_chat(item: ContextItem) -> bool:
    """Whether an item is a chat body's: a message, or its system prompt (a body of system
    messages alone was told to "end the items with the question (kind "question")")."""
    return item.source is not None or (
        item.origin is not None and item.origin[0].startswith(("$.messages", "$.system", "$.instructions"))
    )


def _nothing_sent(item: ContextItem, fmt: OutputFormat, request: Mapping[str, Any]) -> str | None:
    """Why a question of blank text sends nothing as the user's turn (None: it sends something).
    A chat message's other parts (an image, a document, tool results) are sent in a body of its
    own format only; another format gets its text. The user messages just before it are read with
    it as one turn (Anthropic joins them): one of them with something to send is the question's.
    As Anthropic, a turn of nothing was left out, and the body then ended with the previous
    assistant turn, which the model continues instead of answering."""
    if item.source is None:
        return "the question is empty"
    if fmt == "text":
        return None  # a rendering to read: a blank question is shown as it is
    carried = item.source_format == fmt
    if not _sends_nothing(item.source, carried) or _turn_before_sends(item, request, carried):
        return None
    if carried or _sends_nothing(item.source, carried=True):
        return "the question is empty"
    return (
        f"the question has no text, and its other parts (an image, a document, tool results) are "
        f"sent only in a body of its own format: render it as {item.source_format}, or give it text"
    )


def _turn_before_sends(item: ContextItem, request: Mapping[str, Any], carried: bool) -> bool:
    """Whether a user message just before the question's (one turn with it) sends something."""
    messages = request.get("messages")
    if item.origin is None or not isinstance(messages, list):
        return False
    position = message_position(item.origin[0]) - 1
    while 0 <= position < len(messages) and isinstance(messages[position], dict):
        message = messages[position]
        if message.get("role") != "user":
            return False
        if not _sends_nothing(message, carried):
            return True
        position -= 1
    return False


def _sends_nothing(message: Mapping[str, Any], carried: bool) -> bool:
    """Whether a chat message holds nothing to send but blank text (``carried``: its other parts
    go with it; else its text alone does)."""
    content = message.get("content")
    if isinstance(content, list):
        return all(
            isinstance(part, dict)
            and (part.get("type") in _TEXT_PARTS or not carried)
            and not str(part.get("text") or "").strip()
            for part in content
        )
    return not isinstance(content, str) or not content.strip()
