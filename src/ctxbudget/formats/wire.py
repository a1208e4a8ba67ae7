"""Validation of request bodies with pydantic; errors become InvalidRequestError with a JSON path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import InvalidRequestError

__all__ = ["json_path", "validate_body"]

M = TypeVar("M", bound=BaseModel)


def json_path(location: tuple[int | str, ...]) -> str:
    """``("documents", 3, "page_content")`` -> ``$.documents[3].page_content``."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validate_body(model: type[M], request: Mapping[str, Any]) -> M:
    """Validate ``request`` against ``model``; the first error names its path and value."""
    try:
        return model.model_validate(request)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        shown = repr(first.get("input"))
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise InvalidRequestError(f"{first['msg']} (got {shown})", json_path(location)) from exc
