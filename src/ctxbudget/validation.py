"""Turning pydantic validation errors into one line that names the JSON path and the problem."""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["first_error", "json_path"]


def json_path(location: tuple[int | str, ...]) -> str:
    """``("documents", 3, "page_content")`` -> ``$.documents[3].page_content``."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def first_error(error: ValidationError) -> tuple[str, str, object]:
    """The first error's JSON path, message and offending input (pydantic's internal
    ``function-...`` steps are left out of the path)."""
    first = error.errors()[0]
    location = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    return json_path(location), str(first["msg"]), first.get("input")
