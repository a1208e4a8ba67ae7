"""Splitting one budget across several entries: in proportion to their size, or to a common level."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["exceeds", "proportional_shares", "water_level"]


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
