"""Where an item of a question or chat body stands in that body: the paths errors name (the
body's own fields, ``$.messages[2].content``, not the item list it is read into)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["chat_origin", "message_position", "question_origins"]


def question_origins(body: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Where each item :func:`._request._from_question` makes stands in the question body, and its text."""
    origins = {"system": ("$.role", "$.role")}
    for key, prefix, text in (
        ("documents", "document", "page_content"),
        ("history", "history", "content"),
        ("questions", "question", "text"),
    ):
        for n, _ in enumerate(body.get(key) or []):
            origins[f"{prefix}-{n}"] = (f"$.{key}[{n}]", f"$.{key}[{n}].{text}")
    return origins


def chat_origin(path: str) -> tuple[str, str]:
    """A chat item's path and its text's: a message's content, a system block's text, or a
    string system prompt (or instructions) itself."""
    if path.startswith("$.messages["):
        return path, f"{path}.content"
    return path, (f"{path}.text" if path.endswith("]") else path)


def message_position(path: str) -> int:
    """N of a ``$.messages[N]`` path."""
    return int(path.removeprefix("$.messages[").removesuffix("]"))
