"""Checking a quote against its source: ``page:line`` citations resolved in a numbered transcript.

A transcript numbers its lines ``47:12 Q. ...`` (page 47, line 12). A citation holding one range
``47:12-48:3`` (or ``47:12``, or ``47:12-20`` within one page; ``Tr. 47:12`` and ``Dep. at 47:12``
too) names the lines from 47:12 to 48:3; a reversed range names none. A quote is verified when,
with whitespace runs made single and (on both sides) the line labels removed, it stands inside
those lines at word boundaries, in a transcript the citation names (``Jones Dep. at 47:12``: one
that mentions Jones) if any does. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["CitedLines", "cited_lines", "numbered", "parse_citation", "quote_verified", "sources_named"]

# A page:line range anywhere in the citation ("47:12-48:3", "Tr. 47:12", "Smith Dep. at 47:12-20").
_CITATION = re.compile(r"(?<![\d:])(\d{1,5}):(\d{1,3})(?:\s*[-–]\s*(?:(\d{1,5}):)?(\d{1,3}))?(?![\d:])")
_LABEL = re.compile(r"(?m)^\s*(\d{1,5}):(\d{1,3})\s")
_LABELS_ANYWHERE = re.compile(r"(?:(?<=\s)|^)\d{1,5}:\d{1,3}\s")


@dataclass(frozen=True)
class CitedLines:
    """A citation's range: from (page, line) to (page, line), inclusive."""

    first: tuple[int, int]
    last: tuple[int, int]


def parse_citation(citation: str) -> CitedLines | None:
    """The range a ``page:line`` citation names, or None when it is not one."""
    if len(_CITATION.findall(citation)) != 1:
        return None  # none, or several ranges: not one range to check
    match = _CITATION.search(citation)
    assert match is not None
    page, line, end_page, end_line = match.groups()
    first = (int(page), int(line))
    last = (int(end_page or page), int(end_line)) if end_line else first
    return CitedLines(first, last) if last >= first else None


def cited_lines(sources: Iterable[str], cited: CitedLines) -> list[str]:
    """The text of the cited lines in each source that numbers them (none: no source does)."""
    found = []
    for text in sources:
        if not _LABEL.search(text):
            continue
        held = [
            line
            for line in text.split("\n")
            if (label := _LABEL.match(line))
            and cited.first <= (int(label.group(1)), int(label.group(2))) <= cited.last
        ]
        if held:
            found.append("\n".join(held))
    return found


_WITNESS = re.compile(r"\b([A-Z][A-Za-z'’-]+)\s+(?:Dep|Depo|Tr)\b\.?")


def sources_named(citation: str, sources: Sequence[str]) -> list[str]:
    """The sources a citation names: ``Jones Dep. at 47:12`` names the transcripts that mention
    Jones (all of them when none does, or when the citation names no witness)."""
    witness = _WITNESS.search(citation)
    if not witness:
        return list(sources)
    name = witness.group(1).casefold()
    named = [text for text in sources if name in text.casefold()]
    return named or list(sources)


def _plain(text: str, labels: bool) -> str:
    text = _LABELS_ANYWHERE.sub(" ", text) if not labels else text
    return " ".join(text.split())


def _stands_in(quote: str, text: str) -> bool:
    """``quote`` inside ``text`` at word boundaries (not "within 3" inside "within 30 days")."""
    if not quote:
        return False
    start = text.find(quote)
    while start >= 0:
        end = start + len(quote)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() and quote[0].isalnum()) and not (after.isalnum() and quote[-1].isalnum()):
            return True
        start = text.find(quote, start + 1)
    return False


def quote_verified(quote: str, cited_text: str) -> bool:
    """Whether ``quote`` stands verbatim (whitespace aside, labels aside, whole words) in
    ``cited_text``."""
    if not any(ch.isalpha() for ch in _plain(quote, False)):
        return False  # only labels, digits or punctuation: no testimony is quoted
    return any(_stands_in(_plain(quote, labels), _plain(cited_text, labels)) for labels in (True, False))


def numbered(sources: Iterable[str]) -> bool:
    """Whether any source numbers its lines ``page:line`` (a transcript is given)."""
    return any(_LABEL.search(text) for text in sources)
