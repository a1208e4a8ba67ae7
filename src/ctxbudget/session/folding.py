"""Folding the ledger under its ceiling: the oldest entries become one entry per issue.

:func:`fold_entries` says what a fold is; :func:`fold_ledger` replays the entries one by one and
folds in steps, so the result depends on the entries alone. The replay keeps its state as it goes
(each issue's folded group grows by one entry, each entry's own block is counted once, and the
ledger's tokens are a running sum): replayed from scratch at every step, with every block rendered
and counted again, a session of 400 compacted turns spent 0.7 s of each turn here, and 1,600
entries took 9 s.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..errors import BudgetExceeded

__all__ = [
    "MAX_FOLDED_EXHIBITS",
    "MIN_FOLDED_EXHIBITS",
    "Counting",
    "FoldedEntry",
    "exhibit_key",
    "fold_entries",
    "fold_ledger",
]

MAX_FOLDED_EXHIBITS = 60
# When every entry is folded and the ledger is still over its low-water mark (many issues, each
# citing many exhibits), a folded entry lists half as many, down to this many (the rest counted).
MIN_FOLDED_EXHIBITS = 8


class FoldedEntry(BaseModel):
    """Several turns of one issue, folded: the turn range, exhibits, last status and conclusion."""

    model_config = ConfigDict(extra="forbid")
    turns: list[int] = Field(min_length=2, max_length=2)
    issue: str | None
    cited_exhibits: list[str]
    more_exhibits: int | None = None
    status: str | None
    conclusions: list[str]


class Counting(Protocol):
    """How the ledger's blocks are counted: raw tokens of a text, and the reported tokens of a
    raw sum (a :class:`~ctxbudget.tokens.counter.TokenCounter` is one)."""

    def raw(self, text: str) -> int: ...

    def scale(self, raw_tokens: int) -> int: ...


def exhibit_key(exhibit: str) -> tuple[str, tuple[int, ...], str]:
    """How exhibits sort: by their prefix, then their numbers (EX-4 < EX-4.1 < EX-12 < EX-12A)."""
    prefix = re.split(r"\d", exhibit, maxsplit=1)[0].upper()
    return (prefix, tuple(int(d) for d in re.findall(r"\d+", exhibit)), exhibit)


def _first_turn(entry: Mapping[str, Any]) -> int:
    return int(entry["turns"][0] if "turns" in entry else entry["turn"])


def _last_turn(entry: Mapping[str, Any]) -> int:
    return int(entry["turns"][-1] if "turns" in entry else entry["turn"])


class _Group:
    """One issue's entries folded so far: grows by an entry at a time."""

    def __init__(self, issue: str | None, first: Mapping[str, Any]) -> None:
        self.issue, self.first, self.last = issue, first, first
        self.seen: set[str] = set()
        self.keys: list[tuple[str, tuple[int, ...], str]] = []  # the exhibits' sort keys, in order
        self.exhibits: list[str] = []  # sorted by key; equal keys in order of first appearance
        self.cited: dict[str, None] = {}  # the exhibits, the most recently cited last
        self.more, self.status, self.conclusion = 0, None, None

    def add(self, entry: Mapping[str, Any]) -> None:
        self.last = entry
        for exhibit in entry.get("cited_exhibits", []):
            self.cited.pop(exhibit, None)  # moved last: the dict's order is recency
            self.cited[exhibit] = None
            if exhibit not in self.seen:
                self.seen.add(exhibit)
                key = exhibit_key(exhibit)
                at = bisect.bisect_right(self.keys, key)
                self.keys.insert(at, key)
                self.exhibits.insert(at, exhibit)
        self.more += int(entry.get("more_exhibits") or 0)
        self.status = entry.get("status") or self.status
        self.conclusion = ([*entry.get("conclusions", [])] or [self.conclusion])[-1]

    def folded(self, cap: int = MAX_FOLDED_EXHIBITS) -> dict[str, Any]:
        """The folded entry: at most ``cap`` exhibits, the most recently cited (the
        lowest-numbered were kept, so a long issue's newest exhibits left the prompt), laid out in
        exhibit order; the rest counted in ``more_exhibits``."""
        more = self.more + max(0, len(self.exhibits) - cap)
        listed = self.exhibits
        if len(listed) > cap:
            recent = set(list(self.cited)[-cap:])
            listed = [e for e in self.exhibits if e in recent]
        entry = FoldedEntry(
            turns=[_first_turn(self.first), _last_turn(self.last)],
            issue=self.issue,
            cited_exhibits=listed,
            more_exhibits=more or None,
            status=self.status,
            conclusions=[self.conclusion] if self.conclusion is not None else [],
        ).model_dump()
        return {k: v for k, v in entry.items() if v is not None or k != "more_exhibits"}


class _Folder:
    """Entries folded per issue (in order of first appearance), an entry at a time."""

    def __init__(self) -> None:
        self.groups: dict[str | None, _Group] = {}
        self.cap = MAX_FOLDED_EXHIBITS  # the exhibits a folded entry lists

    def add(self, entry: Mapping[str, Any]) -> None:
        """``entry`` folded into the group of each of its issues (a turn on two issues, ``issues``,
        folds into both: under its first alone, the second left the prompt)."""
        for issue in dict.fromkeys(entry.get("issues") or [entry.get("issue")]):
            group = self.groups.get(issue)
            if group is None:
                group = self.groups[issue] = _Group(issue, entry)
            group.add(entry)

    def entries(self) -> list[dict[str, Any]]:
        return [group.folded(self.cap) for group in self.groups.values()]


def fold_entries(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per issue (in order of first appearance): the turn range, the exhibits united,
    the last status and the last conclusion of that issue."""
    folder = _Folder()
    for entry in entries:
        folder.add(entry)
    return folder.entries()


def fold_ledger(
    entries: Sequence[Mapping[str, Any]],
    ceiling: int | None,
    counting: Counting,
    blocks: Callable[[Sequence[Mapping[str, Any]]], list[str]],
    low_water: float = 0.6,
) -> list[dict[str, Any]]:
    """The entries as rendered under ``ceiling`` tokens (None: all, as they are). ``blocks``
    renders a shown ledger as the blocks it is sent in (the folded entries in the first, then a
    block per entry), counted block by block with ``counting`` as the assembly counts them.

    Replayed entry by entry, so the result depends on the entries alone: when adding one takes
    the ledger over the ceiling, the oldest unfolded entries fold (:func:`fold_entries`) until it
    is at most ``low_water`` of the ceiling (with every entry folded and still over it, each
    issue lists half as many exhibits, down to :data:`MIN_FOLDED_EXHIBITS`, for the rest of the
    replay), then it grows again by appending. Raises
    :class:`BudgetExceeded` when even everything folded is over the ceiling."""
    if ceiling is None:
        return [dict(e) for e in entries]
    singles = list(accumulate((counting.raw(blocks([e])[1]) for e in entries), initial=0))
    folder, folded = _Folder(), 0
    header = counting.raw(blocks([])[0])

    def tokens(upto: int) -> int:
        return counting.scale(header + singles[upto] - singles[folded])

    for upto in range(1, len(entries) + 1):
        if tokens(upto) <= ceiling:
            continue
        while folded < upto and tokens(upto) > ceiling * low_water:
            folder.add(entries[folded])
            folded += 1
            header = counting.raw(blocks(folder.entries())[0])
        # everything folded and still over the mark: each issue lists fewer exhibits (else the
        # next entry or two took it over the ceiling again, and every fold rewrote the ledger)
        while tokens(upto) > ceiling * low_water and folder.cap > MIN_FOLDED_EXHIBITS:
            folder.cap = max(MIN_FOLDED_EXHIBITS, folder.cap // 2)
            header = counting.raw(blocks(folder.entries())[0])
    result = folder.entries() + [dict(e) for e in entries[folded:]]
    total = tokens(len(entries))
    if total > ceiling:
        raise BudgetExceeded(
            available_tokens=ceiling,
            required_tokens=total,
            parts={"ledger (Block 3), every entry folded per issue": total},
            hint="raise the policy's ledger_ceiling_tokens, or start a new session",
        )
    return result
