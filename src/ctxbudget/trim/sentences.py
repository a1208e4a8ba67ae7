"""Sentence boundaries for legal and business prose, by an abbreviation-aware regex.

Measured on this machine kind (../shared/notes/dependencies.md): an abbreviation-aware regex
split held-out legal cases better than pysbd (11/14), blingfire (12/14) and syntok (9/14), and
ran about 140x faster than pysbd on 400 KB (pysbd is also superlinear), so we keep our own.

A sentence ends after ``.``, ``!`` or ``?`` (and closing quotes or brackets) followed by
whitespace, unless the word before the period is a known abbreviation ("Mr.", "No. 12",
"Fed. R. Civ. P."), an initial ("J."), a dotted abbreviation ("U.S.C."), or the next word
starts in lower case. A newline ends a sentence, and so do the CJK marks ``。！？``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["iter_sentence_ends", "last_sentence_end", "sentence_ends"]

ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "messrs",
        "hon",
        "rev",
        "gen",
        "col",
        "capt",
        "lt",
        "sgt",
        "inc",
        "ltd",
        "co",
        "corp",
        "llc",
        "llp",
        "plc",
        "bros",
        "assn",
        "dept",
        "govt",
        "univ",
        "no",
        "nos",
        "vol",
        "vols",
        "ch",
        "chap",
        "sec",
        "secs",
        "art",
        "arts",
        "para",
        "paras",
        "pt",
        "pts",
        "cl",
        "sch",
        "app",
        "apps",
        "fig",
        "figs",
        "ex",
        "exs",
        "exh",
        "v",
        "vs",
        "etc",
        "al",
        "approx",
        "cf",
        "esp",
        "viz",
        "ibid",
        "id",
        "op",
        "cit",
        "seq",
        "fed",
        "civ",
        "crim",
        "evid",
        "proc",
        "stat",
        "supp",
        "cir",
        "ct",
        "cal",
        "rptr",
        "bankr",
        "dist",
        "jud",
        "admin",
        "reg",
        "regs",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "am",
        "pm",
        "est",
    ]
)

MAX_WORD = 40
_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|[。！？]+[」』”’)]*|\n")
_DOTTED = re.compile(r"(?:[a-z]\.)+[a-z]?")


def _is_abbreviation(text: str, dot: int) -> bool:
    # Only a short window before the dot is read, so splitting stays linear in the text.
    lo = max(0, dot - MAX_WORD)
    start = max(text.rfind(" ", lo, dot), text.rfind("\n", lo, dot), text.rfind("\t", lo, dot)) + 1
    word = text[max(start, lo) : dot].lstrip("([\"'“‘").lower()
    if not word:
        return False
    return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()) or bool(_DOTTED.fullmatch(word))


def _continues_lowercase(text: str, end: int) -> bool:
    rest = text[end : end + 8].lstrip()
    return bool(rest) and rest[0].islower()


def sentence_ends(text: str) -> list[int]:
    """Character offsets where sentences end (exclusive; trailing whitespace not included)."""
    return list(iter_sentence_ends(text))


def iter_sentence_ends(text: str, start: int = 0, stop: int | None = None) -> Iterator[int]:
    """Sentence ends in ``(start, stop]``, in order, lazily."""
    stop = len(text) if stop is None else stop
    first_visible = len(text) - len(text.lstrip())
    last = start
    # Look a little past ``stop`` so the whitespace lookahead sees what follows.
    for match in _END.finditer(text, start, min(len(text), stop + 1)):
        token = match.group()
        if token == "\n":
            end = match.start()
        else:
            end = match.end()
            if token[0] == "." and token.rstrip("\"'”’)]") == "." and _is_abbreviation(text, match.start()):
                continue
            if token[0] in ".!?" and _continues_lowercase(text, end):
                continue
        if end > stop:
            return
        if end > first_visible and end > last:
            last = end
            yield end


def last_sentence_end(text: str, limit: int) -> int:
    """The last sentence end at or before ``limit`` (0 if none), scanning back from ``limit``
    in growing windows so the cost follows the distance to it, not the length of the text."""
    window = 2048
    while True:
        start = max(0, limit - window)
        found = 0
        for found in iter_sentence_ends(text, start, limit):  # noqa: B007 - the last one is wanted
            pass
        if found or start == 0:
            return found
        window *= 4
