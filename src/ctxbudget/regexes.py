"""Regular expressions given as data (a policy's volatile patterns, a catalog's match rules):
refused before they run when they repeat a repetition, the backtracking that makes a pattern take
exponential time on a text it does not match."""

from __future__ import annotations

import re._constants as _sre_c  # type: ignore[import-not-found]  # a pattern parsed, checked before it runs
import re._parser as _sre  # type: ignore[import-not-found]
from typing import Any

__all__ = ["NESTED_REPEAT_HINT", "repeats_a_repetition"]

NESTED_REPEAT_HINT = (
    "repeats a repetition (such as (a+)+): on a text it does not match it can take exponential "
    "time; repeat it once, or make the inner one possessive (a++)"
)


def repeats_a_repetition(pattern: str) -> bool:
    """Whether an unbounded repeat of ``pattern`` (which compiles) holds another one (``(a+)+``,
    ``(a*b*)*``): ``(a+)+$`` on 32 a's and a ``!`` ran for minutes. Possessive repeats and atomic
    groups never backtrack into themselves, so they are safe."""
    return _nested(_sre.parse(pattern))


def _nested(parsed: Any, inside: bool = False) -> bool:
    for op, value in parsed:
        if op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT):
            _, high, body = value
            unbounded = high == _sre_c.MAXREPEAT
            if unbounded and inside:
                return True
            if _nested(body, inside or unbounded):
                return True
        elif op in (_sre_c.POSSESSIVE_REPEAT, _sre_c.ATOMIC_GROUP):
            continue
        elif (op == _sre_c.SUBPATTERN and _nested(value[-1], inside)) or (
            op == _sre_c.BRANCH and any(_nested(branch, inside) for branch in value[1])
        ):
            return True
    return False
