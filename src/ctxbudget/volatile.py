"""Values that change from request to request and so must never sit in a cached prefix."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["VolatileMatch", "find_volatile"]

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
# Order matters: the more specific kind is reported when several match at one place.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "timestamp",
        re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"),
    ),
    ("UUID", re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")),
    (
        "request or session id",
        re.compile(r"(?i)\b(?:request|req|session|sess|trace|run|correlation)[ _-]?id\s*[:=#]\s*\S+"),
    ),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b")),
    ("date", re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("date", re.compile(rf"\b{_MONTH} \d{{1,2}}, \d{{4}}\b")),
    ("time", re.compile(r"\b\d{1,2}:\d{2}:\d{2}\b")),
    ("time", re.compile(r"\b\d{1,2}:\d{2}\s?(?:[AaPp]\.?[Mm]\.?|UTC|GMT)(?![A-Za-z])")),
    ("unix timestamp", re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b")),
)


@dataclass(frozen=True)
class VolatileMatch:
    """The first volatile value found: its kind, text and character span."""

    kind: str
    value: str
    start: int
    end: int


def find_volatile(text: str) -> VolatileMatch | None:
    """The earliest volatile value in ``text`` (page:line citations such as 47:12 are not times)."""
    found: VolatileMatch | None = None
    for kind, pattern in PATTERNS:
        match = pattern.search(text)
        if match and (found is None or match.start() < found.start):
            found = VolatileMatch(kind, match.group(), match.start(), match.end())
    return found
