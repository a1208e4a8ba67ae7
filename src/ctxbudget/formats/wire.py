"""Validation of request bodies with pydantic; errors become InvalidRequestError with a JSON path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import InvalidRequestError
from ..validation import first_error, json_path

__all__ = ["OpenModel", "json_path", "validate_body"]

M = TypeVar("M", bound=BaseModel)


class OpenModel(BaseModel):
    """A request shape that validates what it names and keeps every field it does not."""

    model_config = ConfigDict(extra="allow")


def validate_body(model: type[M], request: Mapping[str, Any]) -> M:
    """Validate ``request`` against ``model``; the first error names its path and value."""
    try:
        return model.model_validate(request)
    except ValidationError as exc:
        path, message, value = first_error(exc)
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise InvalidRequestError(f"{message} (got {shown})", path) from exc
