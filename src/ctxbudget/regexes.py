"""Regular expressions given as data (a policy's volatile patterns, a catalog's match rules):
refused before they run when they repeat a repetition, the backtracking that makes a pattern take
exponential time on a text it does not match."""

from __future__ import annotations

import re._constants as _sre_c  # type: ignore[import-not-found]  # a pattern parsed, checked before it runs
import re._parser as _sre  # type: ignore[import-not-found]
from typing import Any

__all__ = ["NESTED_REPEAT_HINT", "repeats_a_repetition"]

NESTED_REPEAT_HINT = (
    "repeats a repetition, alternatives or an optional part (such as (a+)+, (a?a?)* or (a|a)*): on "
    "a text it does not match it can take exponential time; repeat it once, or make the inner "
    "one possessive (a++)"
)


def repeats_a_repetition(pattern: str) -> bool:
    """Whether an unbounded repeat of ``pattern`` (which compiles) holds a part that can match in
    more than one way: another repeat of variable length (``(a+)+``, ``(a*b*)*``, ``(a?a?)*``) or
    alternatives (``(a|a)*``). Each lets the engine split the same text between the repeats in
    exponentially many ways before it gives up: ``(a+)+$`` on 32 a's and a ``!`` ran for minutes,
    ``^(h?h?)*x$`` on 22 h's for 18 s. So is an unbounded repeat inside a counted one
    (``(.*a){12}``: polynomial, of the count's degree). Conservative (``(foo|bar)*`` is refused too, though its
    alternatives never overlap); possessive repeats and atomic groups never backtrack into
    themselves, so they are safe."""
    return _nested(_sre.parse(pattern))


def _nested(parsed: Any, inside: bool = False, counted: bool = False) -> bool:
    """``inside``: within an unbounded repeat; ``counted``: within a repeat of a fixed or bounded
    count above 1, where an unbounded inner repeat splits the text in polynomially many ways,
    of the count's degree (``(.*a){12}x`` on 40 a's ran for minutes)."""
    for op, value in parsed:
        if op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT):
            low, high, body = value
            unbounded = high == _sre_c.MAXREPEAT
            if (inside and (unbounded or low != high)) or (counted and unbounded):
                return True
            if _nested(body, inside or unbounded, counted or high > 1):
                return True
        elif op in (_sre_c.POSSESSIVE_REPEAT, _sre_c.ATOMIC_GROUP):
            continue
        elif _risky_group(op, value, inside, counted):
            return True
    return False


def _risky_group(op: Any, value: Any, inside: bool, counted: bool) -> bool:
    """Alternatives inside an unbounded repeat, or a group or alternative that holds a risky part."""
    if op == _sre_c.BRANCH:
        return inside or any(_nested(branch, inside, counted) for branch in value[1])
    return bool(op == _sre_c.SUBPATTERN and _nested(value[-1], inside, counted))
