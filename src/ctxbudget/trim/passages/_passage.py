"""Splitting one long text into passages with exact offsets and citations.

A transcript splits by speaker turn (``Name: ...``) or Q/A line, a numbered record by its
``page:line`` lines, a contract by paragraph or clause; units are grouped into passages of at most
``max_tokens`` (a unit over the cap is cut at sentence ends, or after a space). Each passage
carries a citation: a ``page:line`` range when the text is numbered, else its character range.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ...memo import per_fit_by_identity
from ..sentences import iter_sentence_ends
from ..text import grapheme_ceil, grapheme_floor, has_text

__all__ = [
    "PASSAGE_TOKENS",
    "Passage",
    "citation_of",
    "passage_tokens",
    "reads_as_chat_log",
    "reads_as_lines",
    "split_passages",
    "users_turns",
    "within_field",
]

# Lines that start with a speaker's label (``Name: ``) or a ``page:line`` mark. Each is found from
# the newline before it (the text's own start is matched apart): a pattern that begins with a
# literal is searched for that literal first, where ``^`` in MULTILINE mode is tried at every
# position (522 kB of prose: 0.5 ms instead of 3.3 ms; 2 MB of transcripts: 3.5 ms instead of
# 17 ms). The lookahead keeps the newline the only character taken, so a label whose ``\s`` is
# the next line's newline does not hide that line (property-tested against the ``^`` patterns).
_SPEAKER_HERE = re.compile(r"([^\s:][^\n:]{0,40}):\s")  # the label, captured
_SPEAKER_AFTER = re.compile(r"\n(?=([^\s:][^\n:]{0,40}):\s)")
# A page:line mark may be indented (spaces or tabs before it), as printed depositions are: only
# an unindented one was read, and such a record was cited and selected as prose.
_PAGE_LINE_HERE = re.compile(r"[ \t]*(\d{1,4}:\d{1,3})\s")
_PAGE_LINE_AFTER = re.compile(r"\n(?=[ \t]*(\d{1,4}:\d{1,3})\s)")


@dataclass(frozen=True)
class Passage:
    """A slice ``text[start:end]`` of the original, with its citation."""

    start: int
    end: int
    citation: str


@per_fit_by_identity
def reads_as_lines(text: str) -> bool:
    """Whether ``text`` is a transcript (``Name: ...`` speaker turns) or a numbered record
    (``page:line``): more than 30% of its lines start that way. Its evidence is then an exchange of
    lines; in prose (papers, manuals, contracts, articles) it is a sentence or a paragraph.

    Remembered for the fit (:func:`~ctxbudget.memo.per_fit_by_identity`): splitting a document
    and then selecting from it both ask (4 ms for a 200 kB manual each time). A module cache by
    content kept the last 8 texts asked about past their fits: the stretch of a cut 5 MB message
    (a copy of it) stayed alive after the gateway's request, and the hash of each text was read."""
    starts = _line_starts(text, _SPEAKER_HERE, _SPEAKER_AFTER) + _line_starts(
        text, _PAGE_LINE_HERE, _PAGE_LINE_AFTER
    )
    return starts > 0 and starts > len(text.splitlines()) * 0.3


# The roles of a conversation with an assistant, as logs label its turns.
_CHAT_ROLES = frozenset({"user", "human", "assistant", "ai", "bot", "system", "model"})


@per_fit_by_identity  # as reads_as_lines: nothing kept past the fit
def reads_as_chat_log(text: str) -> bool:
    """Whether ``text`` is a log of conversations with an assistant: speaker turns, 80% or more of
    them labelled by a chat role (``User:``, ``Assistant:``, ``Human:``, ``AI:``). Its evidence is
    what the user said once, a turn in one session among many, not a discussion that runs over
    many turns as in a meeting: it is selected as prose is (:func:`reads_as_lines` still holds)."""
    first = _SPEAKER_HERE.match(text)
    found = ([first.group(1)] if first else []) + _SPEAKER_AFTER.findall(text)
    labels = [label.strip().lower() for label in found]
    roles = sum(label in _CHAT_ROLES for label in labels)
    return roles > 0 and roles >= 0.8 * len(labels) and reads_as_lines(text)


_USER_ROLES = frozenset({"user", "human"})


def users_turns(text: str) -> str:
    """``text`` with every line outside the user's turns blanked (spaces, the same offsets): a
    turn runs from its role label to the next one, a label that is not a chat role (``Note:``)
    continuing it. In a chat log "I" is the user in the user's turns and the assistant in its own."""
    kept, users = [], False
    for line in text.splitlines(keepends=True):
        label = _SPEAKER_HERE.match(line)
        if label and (role := label.group(1).strip().lower()) in _CHAT_ROLES:
            users = role in _USER_ROLES
        kept.append(line if users else " " * len(line))
    return "".join(kept)


def _line_starts(text: str, here: re.Pattern[str], after: re.Pattern[str]) -> int:
    """Lines of ``text`` that start with ``here`` (the first line, then each after a newline)."""
    return (here.match(text) is not None) + len(after.findall(text))


def _units(text: str) -> list[tuple[int, int]]:
    """Lines for transcripts and numbered records; paragraphs otherwise (exact offsets, newline
    kept). A paragraph and the blank lines after it are one unit; text that opens with blank
    lines has them as a unit of their own. Paragraphs are read by where their breaks stand, not
    as strings: the text's lines and its paragraphs, both made as strings, were two more copies
    of a 5 MB document at once (the lines are made for a transcript alone)."""
    units: list[tuple[int, int]] = []
    position = 0
    if reads_as_lines(text):
        for line in text.splitlines(keepends=True):
            units.append((position, position + len(line)))
            position += len(line)
        return units
    for gap in _PARAGRAPH_BREAK.finditer(text):
        start, end = gap.span()
        _add_unit(text, units, position, start)
        if units:  # a break is whitespace alone: joined to the unit before it, not looked at
            units[-1] = (units[-1][0], end)
        else:
            units.append((start, end))
        position = end
    _add_unit(text, units, position, len(text))
    return units


_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def _add_unit(text: str, units: list[tuple[int, int]], start: int, end: int) -> None:
    """``text[start:end]`` as a unit of its own, or, blank after a unit, joined to it."""
    if units and not has_text(text, start, end):
        units[-1] = (units[-1][0], end)
    elif end > start:
        units.append((start, end))


def _cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """A unit over the cap, cut at the first sentence end past the cap each time (or hard at
    twice the cap). Pieces may run a sentence past the cap: cut within it instead, evidence of a
    sentence in manuals is kept less often (emanual 91.0 / 95.7 -> 88.2 / 94.3% at 4k / 8k)."""
    pieces: list[tuple[int, int]] = []
    begin = start
    for stop in (*(start + e for e in iter_sentence_ends(text[start:end])), end):
        if stop - begin >= max_chars or stop == end:
            pieces.append((begin, stop))
            begin = stop
    if begin < end:
        pieces.append((begin, end))
    out: list[tuple[int, int]] = []
    for a, b in pieces:
        out += _hard_cut(text, a, b, max_chars) if b - a > 2 * max_chars else [(a, b)]
    return [(a, b) for a, b in _on_graphemes(text, out) if b > a]


def _on_graphemes(text: str, pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Consecutive pieces with each boundary moved back to the start of the user-perceived
    character it falls in (a sentence end taken at the ``\r`` of ``\r\n``; an accent, a flag's
    second half): no passage starts or ends inside one."""
    out: list[tuple[int, int]] = []
    begin = pieces[0][0] if pieces else 0
    for n, (_, stop) in enumerate(pieces):
        if n + 1 < len(pieces):
            stop = grapheme_floor(text, stop)
            if stop <= begin:
                continue  # the piece was inside one character: it joins the next
        out.append((begin, stop))
        begin = stop
    return out


def _hard_cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """A stretch with no sentence end cut into pieces of at most ``max_chars``, each ending after
    a space in its last fifth when there is one (a kept passage then starts at a word)."""
    pieces: list[tuple[int, int]] = []
    begin = start
    while end - begin > max_chars:
        stop = begin + max_chars
        space = max(
            text.rfind(" ", stop - max_chars // 5, stop), text.rfind("\n", stop - max_chars // 5, stop)
        )
        cut = grapheme_floor(text, space + 1 if space > begin else stop)  # a space may carry a mark
        if cut <= begin:  # one character longer than the cap: kept whole
            cut = grapheme_ceil(text, stop)
        pieces.append((begin, cut))
        begin = cut
    return [*pieces, (begin, end)]


# A dense unit's piece is looked for at most this many characters a token ahead (a piece of text
# sparser than that, a run of "=" say, is cut shorter than the cap, never longer).
_DENSE_REACH = 8

# How far back a stretch's line start is looked for: a numbered line is short, and searching a
# text without newlines back to its start for each passage was quadratic (40 MB on one line: 21 s).
_LINE_REACH = 4096


def citation_of(text: str, start: int, end: int) -> str:
    """A ``page:line`` range for a numbered stretch, else its character range. A stretch that
    starts inside a line (a long answer cut at a sentence end) is cited from that line's mark,
    when the line starts within :data:`_LINE_REACH` characters before it."""
    line = text.rfind("\n", max(0, start - _LINE_REACH), start) + 1
    first = _PAGE_LINE_HERE.match(text, line, end) if line or start <= _LINE_REACH else None
    marks = ([first.group(1)] if first else []) + _PAGE_LINE_AFTER.findall(text, start, end)
    if marks:
        return marks[0] if len(marks) == 1 else f"{marks[0]}-{marks[-1]}"
    return f"chars {start}-{end}"


def within_field(citation: str, start: int, end: int, offset: int) -> str:
    """A citation of ``text[start:end]`` (:func:`citation_of`) for a text that starts ``offset``
    characters into its field (a document's leading blanks): a character range counts from the
    field, as the passage's offsets do (it fell short by the blanks, citing other text); a
    ``page:line`` range is the text's own."""
    return (
        f"chars {offset + start}-{offset + end}"
        if offset and citation == f"chars {start}-{end}"
        else citation
    )


PASSAGE_TOKENS = 256
MIN_PASSAGE_TOKENS = 32  # the smallest passage worth a place of its own


def passage_tokens(budget: int) -> int:
    """The passage size for a budget: 256 tokens, smaller when the budget is under four passages,
    so that a small budget still has windows it can hold (never under 32 tokens)."""
    return max(MIN_PASSAGE_TOKENS, min(PASSAGE_TOKENS, budget // 4))


def split_passages(
    text: str, count: Callable[[int, int], int], max_tokens: int = PASSAGE_TOKENS
) -> list[Passage]:
    """Passages of ``text`` of at most about ``max_tokens`` (``count(start, end)`` gives tokens)."""
    max_chars = max(200, max_tokens * 4)
    units: list[tuple[int, int]] = []
    for start, end in _units(text):
        units += _cut(text, start, end, max_chars) if end - start > max_chars else [(start, end)]
    passages: list[Passage] = []
    begin = units[0][0] if units else 0
    for n, (first, end) in enumerate(units):
        last = n + 1 == len(units)
        if last or count(begin, units[n + 1][1]) > max_tokens:
            # a passage of several units was checked as it grew; one unit alone was not
            alone = begin == first and _over(begin, end, count(begin, end), max_tokens, max_chars)
            for a, b in _by_tokens(text, begin, end, count, max_tokens) if alone else [(begin, end)]:
                passages.append(Passage(a, b, citation_of(text, a, b)))
            begin = end
    return passages


def _over(start: int, end: int, tokens: int, max_tokens: int, max_chars: int) -> bool:
    """Whether a lone unit is cut again by tokens: a dense one (under two characters a token: a
    script such as Amharic, emoji, digits) over twice the cap, any over twice what its character
    cap stands for at four characters a token (a piece may run a sentence past that cap; English
    at a small budget's 200-character floor is kept as it was cut)."""
    if tokens <= 2 * max_tokens:
        return False
    return end - start < 2 * tokens or tokens > 2 * max(max_tokens, max_chars // 4)


def _by_tokens(
    text: str, start: int, end: int, count: Callable[[int, int], int], max_tokens: int
) -> list[tuple[int, int]]:
    """A unit over ``max_tokens`` tokens though within its character cap (a dense script, such as
    Amharic or Tibetan at a token a character or more, or emoji), cut into the longest pieces
    within ``max_tokens``, each found by halving (at most :data:`_DENSE_REACH` characters a token
    ahead) and ending after a space in its last fifth when there is one, never inside a
    user-perceived character (one longer than the cap is kept whole). Such a document was kept not
    at all: no passage of it fitted the budget."""
    pieces: list[tuple[int, int]] = []
    begin = start
    while begin < end:
        low, high = begin, min(end, begin + _DENSE_REACH * max_tokens)
        while low < high:  # the furthest stop within the cap
            middle = (low + high + 1) // 2
            if count(begin, middle) <= max_tokens:
                low = middle
            else:
                high = middle - 1
        if low >= end:
            pieces.append((begin, end))
            break
        space = text.rfind(" ", begin + 4 * (low - begin) // 5, low)
        stop = grapheme_floor(text, space + 1 if space > begin else low)
        if stop <= begin:  # one character over the cap (or none fits): it is kept whole
            stop = grapheme_ceil(text, max(low, begin + 1))
        pieces.append((begin, stop))
        begin = stop
    return pieces
