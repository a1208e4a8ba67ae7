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
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

__all__ = ["CitedLines", "Numbered", "Sources", "cited_lines", "parse_citation", "quote_verified"]

# A page:line range anywhere in the citation ("47:12-48:3", "Tr. 47:12", "Smith Dep. at 47:12-20").
_CITATION = re.compile(r"(?<![\d:])(\d{1,5}):(\d{1,3})(?:\s*[-–]\s*(?:(\d{1,5}):)?(\d{1,3}))?(?![\d:])")
# A line's label, after the line's own indentation (``\s*`` crossed newlines: at every line of a
# run of blank lines, the rest of the run was read, 120 kB took 18 s).
_LABEL = re.compile(r"(?m)^[^\S\n]*(\d{1,5}):(\d{1,3})\s")
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


@dataclass(frozen=True)
class Numbered:
    """One source's labelled lines, sorted by label (line order among equal labels), read once:
    each citation checked against it is then a bisection, not a walk over every line (a chain of
    2,000 superseding quotes over a 1.3 MB transcript took 21 s)."""

    labels: tuple[tuple[int, int], ...]
    lines: tuple[tuple[int, str], ...]  # (position in the source, the line), by label

    @classmethod
    def of(cls, text: str) -> Numbered:
        """The source's labelled lines (none when it numbers none)."""
        found = [
            ((int(label.group(1)), int(label.group(2))), n, line)
            for n, line in enumerate(text.split("\n") if _LABEL.search(text) else ())
            if (label := _LABEL.match(line))
        ]
        found.sort()
        return cls(tuple(f[0] for f in found), tuple((f[1], f[2]) for f in found))

    def cited(self, cited: CitedLines) -> str:
        """The cited lines, in the source's order, joined ('' when none is)."""
        lo, hi = bisect_left(self.labels, cited.first), bisect_right(self.labels, cited.last)
        return "\n".join(line for _, line in sorted(self.lines[lo:hi]))


def cited_lines(sources: Iterable[Numbered], cited: CitedLines) -> list[str]:
    """The text of the cited lines in each source that numbers them (none: no source does)."""
    return [held for source in sources if (held := source.cited(cited))]


_WITNESS = re.compile(r"\b([A-Z][A-Za-z'’-]+)\s+(?:Dep|Depo|Tr)\b\.?")


class Sources:
    """A request's documents, read once for all the quotes checked against them (each check
    read them all again: quadratic in a chain of superseding quotes)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = tuple(texts)

    @cached_property
    def numbered(self) -> tuple[Numbered, ...]:
        """Each source's labelled lines."""
        return tuple(Numbered.of(text) for text in self.texts)

    @cached_property
    def _folded(self) -> tuple[str, ...]:
        return tuple(text.casefold() for text in self.texts)

    def any_numbered(self) -> bool:
        """Whether any source numbers its lines ``page:line`` (a transcript is given)."""
        return any(source.labels for source in self.numbered)

    def named(self, citation: str) -> list[Numbered]:
        """The sources a citation names: ``Jones Dep. at 47:12`` names the transcripts that
        mention Jones (all of them when none does, or when the citation names no witness)."""
        witness = _WITNESS.search(citation)
        if not witness:
            return list(self.numbered)
        name = witness.group(1).casefold()
        named = [source for source, folded in zip(self.numbered, self._folded, strict=True) if name in folded]
        return named or list(self.numbered)


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
