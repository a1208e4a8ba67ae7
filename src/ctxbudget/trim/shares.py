"""Splitting one budget across several entries: in proportion to their size, or to a common level."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["exceeds", "proportional_shares", "shares_keeping_short", "water_level"]


def proportional_shares(budget: int, sizes: list[int]) -> list[int]:
    """Each entry's share: its size if all fit, else floor shares with the remainder handed out
    one token each to the largest entries first (ties: earlier first)."""
    total = sum(sizes)
    if total <= budget:
        return list(sizes)
    if budget <= 0 or total <= 0:
        return [0] * len(sizes)
    shares = [budget * size // total for size in sizes]
    left = budget - sum(shares)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        if left <= 0:
            break
        if shares[i] < sizes[i]:
            shares[i] += 1
            left -= 1
    return shares


def shares_keeping_short(budget: int, sizes: list[int]) -> list[int]:
    """Each entry's share when entries share ``budget``: an entry no larger than an equal share of
    what the others kept whole leave is kept whole (again, until none is), and the larger ones
    share the rest in proportion to their sizes (:func:`proportional_shares`). A short question
    asked after a long pasted text is kept whole, where shares in proportion to size cut it
    with the long one ("Who signed the notice letter?" to "Who signed")."""
    whole: set[int] = set()
    while True:
        rest = budget - sum(sizes[i] for i in whole)
        open_ = [i for i in range(len(sizes)) if i not in whole]
        if not open_ or rest <= 0:
            break
        short = {i for i in open_ if sizes[i] * len(open_) <= rest}
        if not short:
            break
        whole |= short
    shares = [sizes[i] if i in whole else 0 for i in range(len(sizes))]
    cut = [i for i in range(len(sizes)) if i not in whole]
    for i, share in zip(cut, proportional_shares(max(0, rest), [sizes[i] for i in cut]), strict=True):
        shares[i] = share
    return shares


def water_level(sizes: list[int], budget: int) -> int:
    """The largest cap ``t`` with ``sum(min(size, t)) <= budget``: cutting to it trims the
    largest entries first, and evenly, instead of emptying the largest one."""
    low, high = 0, max(sizes, default=0)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(size, mid) for size in sizes) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def exceeds(values: Iterable[int], limit: int) -> bool:
    """Whether the values sum to more than ``limit`` (read only until they do)."""
    total = 0
    for value in values:
        total += value
        if total > limit:
            return True
    return False
