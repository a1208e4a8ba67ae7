"""What one fit reads from its request (its question, its messages' layout), remembered for that
fit alone.

A request's question is scored against each of its documents in turn, and a message's question
is asked of it several times (its query, its protected tokens, its cut): a question of 10,000
words was read again for each of 200 documents (4 s of a 1.4 s fit's work). Module-wide caches
kept what they read past the fit (a 2 MB question held 50 MB after it); here a fit opens a memo
(:func:`fit_memo`) that its calls share and that goes when it returns. Outside one, nothing is
remembered. The memo lives in a context variable: each thread (each gateway request) has its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["fit_memo", "per_fit", "per_fit_by_identity"]

T = TypeVar("T")
K = TypeVar("K")

_ACTIVE: ContextVar[dict[Any, Any] | None] = ContextVar("ctxbudget_fit_memo", default=None)


@contextmanager
def fit_memo() -> Iterator[None]:
    """Remember what :func:`per_fit` functions read until the block ends (a memo already open
    is shared: a fit inside an assembly reads the assembly's)."""
    if _ACTIVE.get() is not None:
        yield
        return
    token = _ACTIVE.set({})
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def per_fit(function: Callable[[K], T]) -> Callable[[K], T]:
    """``function`` of one hashable argument, remembered in the open :func:`fit_memo` by value."""

    @functools.wraps(function)
    def remembered(argument: K) -> T:
        memo = _ACTIVE.get()
        if memo is None:
            return function(argument)
        key = (function, argument)
        if key not in memo:
            memo[key] = function(argument)
        return memo[key]  # type: ignore[no-any-return]

    return remembered


def per_fit_by_identity(function: Callable[[K], T]) -> Callable[[K], T]:
    """``function`` of one value, remembered in the open :func:`fit_memo` by the value's identity
    (a message of megabytes is not hashed to be found again, a list of messages is not hashable;
    the memo holds the value meanwhile, so its identity cannot be reused). For values a fit never
    changes: a fit never changes its request."""

    @functools.wraps(function)
    def remembered(text: K) -> T:
        memo = _ACTIVE.get()
        if memo is None:
            return function(text)
        key = (function, id(text))
        found = memo.get(key)
        if found is None or found[0] is not text:
            found = memo[key] = (text, function(text))
        return found[1]

    return remembered
