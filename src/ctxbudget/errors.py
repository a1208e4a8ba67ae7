"""The whole ctxbudget exception tree.

::

    CtxBudgetError                 base of everything ctxbudget raises
    ├── ConfigError                misuse: bad options, policy or catalog file
    │   └── UnknownEncodingError   an encoding name nothing registered
    ├── InvalidRequestError        misuse: the request body is malformed (carries a JSON path)
    └── BudgetExceeded             outcome: what must be sent cannot fit the window

Misuse errors say what was wrong and where; outcome errors carry the numbers. Exit codes and
HTTP statuses are chosen only at the edges (CLI, gateway), never here. Third-party exceptions
are wrapped with ``raise ... from exc`` at the boundary where they enter.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "BudgetExceeded",
    "ConfigError",
    "CtxBudgetError",
    "InvalidRequestError",
    "UnknownEncodingError",
]


class CtxBudgetError(Exception):
    """Base class of every error ctxbudget raises on purpose."""


class ConfigError(CtxBudgetError):
    """An option, policy or catalog value is invalid; the message names it and the fix."""


class UnknownEncodingError(ConfigError):
    """An encoding name that no registered tokenizer provides."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown encoding {name!r}; registered encodings: {', '.join(known)}")


class InvalidRequestError(CtxBudgetError):
    """The request body is malformed. ``path`` is the JSON path of the offending value."""

    def __init__(self, message: str, path: str = "$") -> None:
        self.path = path
        self.reason = message
        super().__init__(f"{path}: {message}")


class BudgetExceeded(CtxBudgetError):
    """Parts that cannot be trimmed do not fit the tokens available.

    ``parts`` maps each untrimmable part to its token cost, so the caller can see what to
    shorten upstream.
    """

    def __init__(self, *, available_tokens: int, required_tokens: int, parts: Mapping[str, int]) -> None:
        self.available_tokens = available_tokens
        self.required_tokens = required_tokens
        self.parts = dict(parts)
        listing = ", ".join(f"{name} {tokens:,}" for name, tokens in sorted(self.parts.items()))
        super().__init__(
            f"cannot fit: the parts that cannot be trimmed need {required_tokens:,} tokens "
            f"but only {available_tokens:,} are available ({listing}); shorten them upstream, "
            "raise --max-context-tokens, lower --reserve-output-tokens, or pass --on-overflow empty"
        )
