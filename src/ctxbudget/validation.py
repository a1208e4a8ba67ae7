"""Turning pydantic validation errors into one line that names the JSON path and the problem."""

from __future__ import annotations

import re

from pydantic import ValidationError

__all__ = ["first_error", "json_path"]


def json_path(location: tuple[int | str, ...]) -> str:
    """``("documents", 3, "page_content")`` -> ``$.documents[3].page_content``."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


# Steps pydantic adds to a location that are not in the JSON: union branches (``str``,
# ``list[_Block]``, a model's class name) and validator functions.
_NOT_IN_JSON = re.compile(r"^(str|int|float|bool|none|(list|dict|tuple)\[.*\]|_\w+|function-.*)$")


_INSTANCE_OF = re.compile(r" or instance of \w+")


def first_error(error: ValidationError) -> tuple[str, str, object]:
    """The most specific error's JSON path, message and offending input: where a union failed
    every branch, the branch that got deepest into the value says best what is wrong."""
    errors = error.errors()
    # Of equally deep errors, an unknown key first: a misspelt key ("evicton") also leaves the
    # key it meant missing, and the typo is what the user must see. Then one that is not a
    # union's other branch refusing the type (a table given for `str | Table`: the table's own
    # error says what is wrong, "should be a valid string" does not).
    deepest = max(
        errors,
        key=lambda e: (len(e["loc"]), e["type"] == "extra_forbidden", not e["type"].endswith("_type")),
    )
    location = tuple(p for p in deepest["loc"] if not (isinstance(p, str) and _NOT_IN_JSON.match(p)))
    message = str(deepest["msg"]).removeprefix("Value error, ")  # our own validators' messages
    # "a valid dictionary or instance of _ImageURL": the class is ours, not the client's
    message = _INSTANCE_OF.sub("", message)
    return json_path(location), message, deepest.get("input")
