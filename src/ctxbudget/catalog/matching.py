"""Match rules as data: a clause tree (``equals``, ``starts_with``, ``ends_with``, ``contains``,
``regex``, ``or``, ``and``) compiled once into a predicate over a lower-cased model id.

The bundled rules come from genai-prices' data; a user catalog may give its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from ..regexes import parse_warning, slow_pattern_hint

__all__ = ["ANY_IDS", "Predicate", "compile_clause"]

Predicate = Callable[[str], bool]

_LEAVES: dict[str, Callable[[str], Predicate]] = {
    "equals": lambda v: lambda s: s == v,
    "starts_with": lambda v: lambda s: s.startswith(v),
    "ends_with": lambda v: lambda s: s.endswith(v),
    "contains": lambda v: lambda s: v in s,
}


def _regex(pattern: str, where: str, checked: bool) -> Predicate:
    if checked:  # it compiled when its catalog was read: compiled when first matched against
        return _Deferred(pattern, where)
    if warned := parse_warning(pattern, re.IGNORECASE):
        raise ConfigError(f"{where}: match regex {pattern!r} is ambiguous to Python ({warned}); escape it")
    compiled = _compiled(pattern, where)
    if hint := slow_pattern_hint(pattern):  # a client's model id is matched against it
        raise ConfigError(f"{where}: match regex '{pattern}' {hint}")
    return lambda s: compiled.search(s) is not None


class _Deferred:
    """A checked rule's regular expression, compiled when an id is first matched against it: a
    provider rule after one that matches (``gpt-5`` is OpenAI's by ``starts_with``) never is
    (compiling the two the bundled rules reached for ``gpt-5``: a fifth of a process's first fit
    of a two-word body, by instruction count)."""

    def __init__(self, pattern: str, where: str) -> None:
        self._pattern = pattern
        self._where = where
        self._compiled: re.Pattern[str] | None = None

    def __call__(self, model_id: str) -> bool:
        compiled = self._compiled
        if compiled is None:  # two threads may both compile it: equal patterns
            # a Catalog built in code (its rules not read from a file) may hold one that does not
            # compile: a ConfigError naming it, as when rules compiled with their catalog's index
            compiled = self._compiled = _compiled(self._pattern, self._where)
        return compiled.search(model_id) is not None


def _compiled(pattern: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise ConfigError(f"{where}: match regex {pattern!r} does not compile: {exc}") from exc


# Ids no model's rule means to match all together: a rule that holds for each of them holds for
# every id, as an empty match string would (".*", ".+", "\\w", "."). Real ids are never empty.
ANY_IDS = ("x", "Q-9", "._:/@~", "zz")


def compile_clause(clause: Mapping[str, Any], where: str = "match", *, checked: bool = False) -> Predicate:
    """One predicate for ``clause``; ``where`` names it in errors. ``checked``: its regular
    expressions passed :func:`~ctxbudget.regexes.slow_pattern_hint` when their catalog was read
    (a user catalog's file when it is loaded, the bundled file in the test suite), and are not
    checked again (half of compiling the bundled rules: about 3 ms of a process's first id that
    needs them)."""
    if not isinstance(clause, Mapping) or len(clause) != 1:
        raise ConfigError(f"{where}: a match clause has exactly one key, got {sorted(clause)}")
    ((key, value),) = clause.items()
    if key in (*_LEAVES, "regex") and isinstance(value, str) and not value:
        raise ConfigError(f"{where}: {key} is empty, which would match every model id")
    if key in _LEAVES and isinstance(value, str):
        return _LEAVES[key](value.lower())
    if key == "regex" and isinstance(value, str):
        return _regex(value, where, checked)
    if key in ("or", "and") and isinstance(value, list) and not value:
        never = "would match every model id" if key == "and" else "would match no model id"
        raise ConfigError(f"{where}: {key} is an empty list, which {never}")
    if key in ("or", "and") and isinstance(value, list):
        parts = [compile_clause(c, f"{where}.{key}[{i}]", checked=checked) for i, c in enumerate(value)]
        combine = any if key == "or" else all
        return lambda s: combine(p(s) for p in parts)
    if key in ("or", "and"):
        raise ConfigError(f"{where}: {key!r} takes a list of clauses, got {type(value).__name__}")
    if key in (*_LEAVES, "regex"):
        raise ConfigError(f"{where}: {key!r} takes a string, got {type(value).__name__}")
    raise ConfigError(
        f"{where}: unknown match clause {key!r}; use equals, starts_with, ends_with, contains, regex, or, and"
    )
