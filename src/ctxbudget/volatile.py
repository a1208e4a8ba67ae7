"""Values that change from request to request and so must never sit in a cached prefix.

Recognised: timestamps (ISO 8601, fractional seconds and ``Z`` too, compact ``20260916103211``,
HTTP/RFC 2822 and ``Tue Sep 16 2026 10:32`` forms), dates (ISO, with en dashes too, US ``09/16/2026``,
European ``16.09.2026``, ``2026.09.16``, ``2026年9月16日`` (in a sentence, full-width, Korean too; and any value glued to Chinese,
Japanese or Korean letters: ``今日は2026-09-16です``), month names either way round (German, French and Spanish ones too: ``3. Dezember 2026``), in capitals and in lower
case too, and ``16-Sep-2026``, ``Sep-16-2026``, ``16SEP2026``, ``2026-Sep-16``, weekday forms, and
without a year after a word saying it is today's: ``Today is September 16``, ``Date: Sep 16``),
clock times (and ``T10:32:11Z`` alone, and ``Current time: 3pm``), Unix timestamps, UUIDs, long
hex nonces, request, trace and session ids (quoted too, as JSON and YAML write a key and its
value: ``"request_id": "r9"``, ``"current_time": "10:05"``), and case and docket numbers. A policy adds its own
patterns and an allow-list (``[volatile]`` in the policy file: regular expressions); a match that
overlaps an allowed span is not reported.

Clock times and ``page:line`` citations share a shape (``10:32``, ``47:12``). A bare ``H:MM`` is
a time when its hour is at most 23 and its minutes are over 28 (a transcript page has 25 lines,
28 in some formats), or when a time word (``a.m.``, ``UTC``, ``o'clock``, ``at``, ``time``)
stands next to it; it is never a time inside a citation range (``47:12-48:3``) or after
``page``, ``p.``, ``Tr.``, ``Dep.`` or ``id. at`` (``Smith Dep. at 12:15``), nor a ratio
(``scale 1:50``, ``a 1:50 scale``, ``at 1:50 scale``). Dotted dates after ``Section`` or ``§`` are section numbers, ten digits after
capital letters (``DEF 1600000123``) a Bates number, and a case number needs a separator or four
digits (``case no. 30(b)(6)`` is a rule).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .regexes import TextSearch, text_search

if TYPE_CHECKING:
    import regex

__all__ = ["PATTERNS", "VolatileMatch", "VolatileRules", "find_volatile"]

_MONTH_NAMES = r"Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
# As written in prose, in capitals (court captions, forms: "SEPTEMBER 16, 2026", "16SEP2026") and
# in lower case ("march 6, 2026": a template's or a lower-cased text's); "in march the parties" is
# no date: every pattern wants a day and a year, or a weekday, next to the name.
_MONTH = rf"(?:{_MONTH_NAMES}|{_MONTH_NAMES.upper()}|{_MONTH_NAMES.lower()})\.?"
_DAY_OF_MONTH = r"(?:0?[1-9]|[12]\d|3[01])"
# German, French and Spanish month names, as a day and a year stand around them: "3. Dezember
# 2026", "le 1er décembre 2026", "3 de diciembre de 2026" (each passed INV-CTX-01)
_OTHER_MONTH = (
    r"(?i:januar|jänner|februar|märz|maerz|april|mai|juni|juli|august|september|oktober|november|dezember"
    r"|janvier|février|fevrier|mars|avril|juin|juillet|août|aout|septembre|octobre|novembre"
    r"|décembre|decembre|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre"
    r"|octubre|noviembre|diciembre)"
)
_TITLED_MONTH = rf"(?:{_MONTH_NAMES}|{_MONTH_NAMES.upper()})\.?"
_NOW_DATE = (  # a word that says the date is today's: today, current date, as of, updated, or a
    # "Date:" header opening a line ("Due date: April 15" is a fixed one)
    r"(?:(?i:today(?:['\u2019]s date)?|current[ _]date|date today|as of|updated|last updated)"
    r"[\"']?(?:\s+is\s+|\s*:\s*|\s+)[\"']?|(?m:^)(?:Date|DATE)\s*:\s*)"
)
_NOW_TIME = (  # a word that says the hour is now's (a bare "time" is as often a fixed one: "Start time: 9am")
    r"(?:(?i:current time|time now|the time is|time is now))(?:\s+is\s+|\s*:\s*|\s+)"
)
# before "time", what says it is now's: a now word, or the start of a line (a "Time:" header)
_NOW_TIME_WORD = (
    r"(?:(?<=current[ \t_-])|(?<=local[ \t_-])|(?<=request[ \t_-])|(?<=server[ \t_-])"
    r"|(?<=system[ \t_-])|(?<=the )|(?<=date and )|(?<=date & )|(?<=date/)"
    r"|(?<![^\n])|(?<=\n[-*#> \t])|(?<=\n[-*#>] ))"  # a header: a line's start, bulleted or indented
)
_NO_YEAR = r"(?!,?\s*(?:19|20)\d{2}\b)"  # with its year, the dated patterns above report it
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\.?,?"
_YEAR = r"(?:19|20)\d{2}"
_CJK_YEAR = r"(?:[1\uff11][9\uff19]|[2\uff12][0\uff10])\d{2}"  # ASCII or full-width digits
_CLOCK = r"(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?"
_NOT_CITED = r"(?<![\d:.\-–])(?<!page )(?<!p\. )(?<!Tr\. )(?<!Dep\. )"
_RATIO_WORD = r"[ -](?i:scale|ratio)\b"  # after H:MM, a ratio's word: "a 1:50 scale", "at 1:50 scale"
_TIME_WORD = r"\s?(?:[AaPp]\.?[Mm]\b\.?|UTC\b|GMT\b|o'clock\b|hrs\b|h\b)"

_CITED_AT = r"(?<!Tr\. )(?<!Dep\. )(?<!Depo\. )(?<!id\. )(?<!Id\. )(?<!Tr )(?<!Dep )"
_CASE_NUMBER = r"(?:[A-Z0-9]+(?:[-:/.][A-Z0-9]+)+|\d{4,})"
_NOT_SECTION = r"(?<!Section )(?<!section )(?<!Sec\. )(?<!§ )(?<!§)"

# An id's value runs on after its first digit, which comes within 64 characters of its start:
# unbounded there, a run of id words with no digit ("session-id-session-id-...") was read to its
# end from each of its words (160 kB: 13.7 s). The tail decides nothing (it also matches
# nothing), so the finders leave it out (:func:`_finders`): read from each candidate, it was the
# same walk to the run's end.
_ID_TAIL = r"[\w.-]*"
# Order matters: the more specific kind is reported when several match at one place.
_PATTERN_SOURCES: tuple[tuple[str, str], ...] = (
    (
        "timestamp",
        rf"\b{_YEAR}-\d{{2}}-\d{{2}}[T ]{_CLOCK}(?:Z|[+-]\d{{2}}:?\d{{2}})?",
    ),
    # ISO 8601's basic form, with its Z or offset too (AWS's X-Amz-Date: 20260916T103211Z)
    (
        "timestamp",
        rf"\b{_YEAR}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])T?[0-2]\d[0-5]\d[0-5]\d(?:Z|[+-]\d{{4}})?\b",
    ),
    ("timestamp", rf"\b(?:{_DAY}\s+)?{_MONTH}\s+\d{{1,2}},?\s+{_YEAR}\s+{_CLOCK}\b"),
    ("timestamp", rf"\b{_DAY}\s+\d{{1,2}}\s+{_MONTH}\s+{_YEAR}\s+{_CLOCK}\b"),
    ("UUID", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    (
        "request or session id",
        (
            r"(?i)\b(?:x-)?(?:request|req|session|sess|trace|span|run|correlation|conversation|message|msg)"
            r"[ _-]?id\b[\"']?(?:\s*[:=#])?\s*[\"']?[\w.-]{0,64}?\d" + _ID_TAIL
        ),
    ),
    (
        "case or docket number",
        rf"(?i)\b(?:case|docket|matter|claim)\s*(?:id|no\.?|number|#)\s*[:#]?\s*{_CASE_NUMBER}",
    ),
    ("case or docket number", rf"(?i)\b(?:civil action|docket)\s+(?:no\.?\s*)?{_CASE_NUMBER}"),
    ("case or docket number", r"(?i)\b(?:\d{1,2}:)?\d{2}-(?:cv|cr|mc|bk|ap|md|civ)-\d{3,6}\b"),
    ("case or docket number", r"\b(?:CV|CR|MC|BK|AP)-?\d{2,4}-\d{3,6}\b"),
    ("hex nonce", r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{16,}\b"),
    # a word processor's dashes too (en dash, non-breaking hyphen: "2026–09–16")
    ("date", rf"\b{_YEAR}[-/\u2011\u2013](?:0?[1-9]|1[0-2])[-/\u2011\u2013](?:0?[1-9]|[12]\d|3[01])\b"),
    # dotted, year first, as Hungarian, Korean and Chinese texts write it: two-digit month and
    # day (a version such as 2024.1.3 stays one)
    ("date", rf"\b(?=\d){_NOT_SECTION}{_YEAR}\.(?:0[1-9]|1[0-2])\.(?:0[1-9]|[12]\d|3[01])\b"),
    # in characters, as Chinese and Japanese write it (Korean too: 2026년 9월 16일), in ASCII or
    # full-width digits, and with no word start before it: written with no space in a sentence
    # ("今日は2026年9月16日です" passed INV-CTX-01), so only no digit before it is wanted
    ("date", rf"(?<!\d){_CJK_YEAR} ?[年년] ?\d{{1,2}} ?[月월] ?\d{{1,2}} ?[日일]"),
    ("date", r"\b(?:0?[1-9]|[12]\d|3[01])/(?:0?[1-9]|[12]\d|3[01])/(?:\d{4}|\d{2})\b"),
    (
        "date",
        rf"\b(?=\d){_NOT_SECTION}(?:0?[1-9]|[12]\d|3[01])[.-](?:0?[1-9]|[12]\d|3[01])[.-]{_YEAR}\b",
    ),
    ("date", rf"\b(?:{_DAY}\s+)?{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+{_YEAR}\b"),
    (
        "date",
        rf"\b(?:{_DAY}\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:day\s+)?(?:of\s+)?{_MONTH},?\s+{_YEAR}\b",
    ),
    ("date", rf"\b{_DAY}\s+{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b"),
    ("date", rf"\b{_DAY_OF_MONTH}(?:\.|er)?\s+(?:de\s+)?{_OTHER_MONTH}(?:\s+de)?\s+{_YEAR}\b"),
    ("date", rf"\b{_DAY_OF_MONTH}[-/]?{_MONTH}[-/]?{_YEAR}\b"),  # 16-Sep-2026, 16SEP2026
    ("date", rf"\b{_MONTH}[-/]{_DAY_OF_MONTH}[-/]{_YEAR}\b"),  # Sep-16-2026
    ("date", rf"\b{_YEAR}-{_MONTH}-{_DAY_OF_MONTH}\b"),  # 2026-Sep-16
    # without a year after a word that says it is today's ("Today is September 16", "Current date:
    # 16 September"): alone, a date without a year is as often a fixed one ("due April 15") or no
    # date ("Clause 4 May not be assigned")
    ("date", rf"\b{_NOW_DATE}{_TITLED_MONTH}\s+{_DAY_OF_MONTH}(?:st|nd|rd|th)?\b{_NO_YEAR}"),
    (
        "date",
        rf"\b{_NOW_DATE}(?:the\s+)?{_DAY_OF_MONTH}(?:st|nd|rd|th)?\s+(?:of\s+)?{_TITLED_MONTH}(?!\w){_NO_YEAR}",
    ),
    ("time", rf"\b(?=\d){_NOT_CITED}{_CLOCK}{_TIME_WORD}"),
    # an hour alone with its a.m. or p.m. after a word that says it is the time now ("Current
    # time: 3pm"): alone it is as often a fixed hour ("open 9am to 5pm") or no time ("Item 3 PM")
    ("time", rf"\b{_NOW_TIME}(?:1[0-2]|0?[1-9])\s?[AaPp]\.?[Mm]\b\.?"),
    (
        "time",
        # a colon or "is" after a word that says the time is now's ("Current time: 10:05", "The
        # time is 10:05", a "Time:" header opening a line, "Updated: 10:05") passed INV-CTX-01
        # whenever the minutes could be a transcript line (28 or less); after a bare "time" it
        # is as often a fixed one ("Hearing time: 10:00")
        # (quoted too, as JSON and YAML write a key and its value: "current_time": "10:05")
        rf"(?i)(?:\b(?=[atug]){_CITED_AT}(?:at\s*|time\s*|(?:{_NOW_TIME_WORD}time[\"']?(?:\s*:|\s+is\b)"
        # (a ratio with its word after it is none: "drawn at 1:50 scale", as "a 1:50 scale" below)
        rf"|(?:as of|updated|generated)[\"']?(?:\s*:)?)\s*[\"']?)|@\s*){_CLOCK}(?![\d\-–:]|{_RATIO_WORD})",
    ),
    # a snake_case key naming the time now, as JSON and YAML write it ("current_time": "10:05"):
    # the word start a "time" above wants is not there after an underscore
    ("time", rf"(?i)\b(?:current|local)_time[\"']?\s*[:=]\s*[\"']?{_CLOCK}(?![\d\-–:])"),
    # with fractional seconds and a Z too ("Build stamp 10:32:11Z." passed INV-CTX-01)
    ("time", r"\b(?:[01]?\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?Z?\b"),
    ("time", r"\bT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?Z?\b"),  # an ISO time alone: T10:32:11Z
    (
        "time",
        rf"\b(?=\d){_NOT_CITED}(?<!scale )(?<!ratio )(?:[01]?\d|2[0-3]):(?:29|[3-5]\d)\b(?![\-–:]?\d|{_RATIO_WORD})",
    ),
    ("unix timestamp", r"\b(?=1)(?<![A-Z] )(?<![A-Z]-)(?<![A-Z]_)1[5-9]\d{8}(?:\d{3})?\b"),
)


# Where a match of each of the patterns (same order) can start: a character of the scanner's class
# at a word start (every pattern opens with ``\b`` before it), or an ``@``. Scanning for these in
# C and trying a pattern only there finds what ``finditer`` finds, which tries every position (a
# pattern opening with ``\b`` gives ``re`` no first character to skip to). Each scanner opens
# with one character class, so ``re`` skips to candidates in C; a lookahead may add what must
# follow. ``(?i)`` patterns list every character that matches case aside (``ſ`` is an ``s``:
# scanned apart, as a class beyond Latin-1 scans slower). Checked against ``finditer`` in
# tests/test_volatile.py.
_WORD_START = r"(?<!\w[^@])"
_LOWER_MONTH_STARTS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_LOWER_MONTH_CLASS = "[adfjmnos]"  # their first letters
_SCANNER_SOURCES: dict[str, tuple[str, ...]] = {
    name: tuple(f"{first}{_WORD_START}{then}" for first, then in parts)
    for name, parts in {
        "digit": [(r"\d", "")],
        # the first letters of the day and month names; in lower case only where a month's name
        # starts (a class of its first letters took a third of the words of prose: +15% scan time)
        "date word": [("[ADFJMNOSTW]", ""), (_LOWER_MONTH_CLASS, f"(?<=(?={_LOWER_MONTH_STARTS}).)")],
        "digit or date word": [(r"[\dADFJMNOSTW]", "")],
        "uuid": [("[0-9a-fA-F]", "(?=[0-9a-fA-F]{7}-)")],
        "hex": [("[0-9a-fA-F]", "(?=[0-9a-fA-F]{15})")],
        "id word": [("[xXrRsStTcCmM]", ""), ("\u017f", "")],
        "case word": [("[cCdDmM]", "")],
        "court code": [("[ABCM]", "")],
        "time word": [("[aAtTuUgG@]", "")],
        "now word": [("[aAcCdDtTuUlL]", "")],
    }.items()
}
# a year in characters has no word start before it (a sentence runs on without a space): its
# first digit, not after a digit
_SCANNER_SOURCES["year in characters"] = ("[12\uff11\uff12](?<!\\d.)(?=\\d{3} ?[年년])",)
# scanners whose patterns are written in an unspaced script's own letters (年, 년): they read
# the text as it is (not its letters as separators), and find nothing to scan in an ASCII text
# (a scan of its digits cost 5% on the bundled request)
_READ_AS_WRITTEN = frozenset({"year in characters"})
_STARTS: tuple[str, ...] = (
    "digit",
    "digit",
    "date word",
    "date word",
    "uuid",
    "id word",
    "case word",
    "case word",
    "digit",
    "court code",
    "hex",
    "digit",
    "digit",
    "year in characters",
    "digit",
    "digit",
    "date word",
    "digit or date word",
    "date word",
    "digit",
    "digit",
    "date word",
    "digit",
    "now word",
    "now word",
    "digit",
    "now word",
    "time word",
    "now word",
    "digit",
    "time word",
    "digit",
    "digit",
)


def _scoped(text: str) -> str:
    """The pattern's text with a leading global ``(?i)`` made a scoped group, to nest it."""
    return f"(?i:{text[4:]})" if text.startswith("(?i)") else text


def _first_letters(words: list[str]) -> str:
    """An alternation of ``words`` grouped by their first letter, so that ``re`` rejects a
    candidate after a comparison or two a group, not one a word."""
    rests: dict[str, list[str]] = {}
    for word in sorted(set(words)):
        rests.setdefault(word[0], []).append(re.escape(word[1:]))
    return "(?:" + "|".join(f"{re.escape(c)}(?:{'|'.join(r)})" for c, r in rests.items()) + ")"


_DAY_STARTS = _DAY.removeprefix("(?:").partition(")")[0].split("|")  # the patterns' own day names
_MONTH_STARTS = [m.title() for m in _LOWER_MONTH_STARTS.split("|")]
# What every pattern a scanner serves has at its start, tested before the patterns: a candidate
# fails the served alternation only after each pattern has tried each of its day and month names
# (about 45 literals a pattern), where this rejects it at its first letters. On the bundled
# playbook the date-word scan took 1.09 ms and the digit one 1.04 ms, for no match. The day and
# month names are the patterns' own; the rest is read off the patterns by hand, so a pattern
# added to one of these scanners must open with what its check names (the property tests of
# tests/test_volatile.py find a match start that is no candidate):
# - date word: a day's name, or a month's in any of the three cases the patterns write;
# - digit or date word: a day's name, or one or two digits then a suffix and a space;
# - digit: the digits and what follows them: one or two then a time's colon and digit, a date's
#   separator and day, a letter (a month's name, "er"), or spaces before the first two letters
#   of a German, French or Spanish month's name in any case, or "de" ("3 de diciembre"); four
#   then a date's separator; or eight and more (a compact stamp, a Unix time).
_OTHER_MONTH_HEADS = sorted({"de", *(w[:2] for w in _OTHER_MONTH.removeprefix("(?i:")[:-1].split("|"))})
_PRECHECKS = {
    "date word": _first_letters(
        _DAY_STARTS + _MONTH_STARTS + [m.upper() for m in _MONTH_STARTS] + [m.lower() for m in _MONTH_STARTS]
    ),
    "digit or date word": rf"(?:{_first_letters(_DAY_STARTS)}|\d{{1,2}}(?!\d)(?:st|nd|rd|th)?\s)",
    "digit": (
        r"(?:\d{1,2}(?!\d)(?::\d|[./-]\d{1,2}[./-]|[-/]?[A-Za-z]"
        rf"|\.?\s+(?i:{'|'.join(_OTHER_MONTH_HEADS)}))"
        r"|\d{4}[-/.\u2011\u2013]|\d{8})"
    ),
}


def _finder_sources(name: str) -> tuple[str, ...]:
    """The scanner ``name`` kept only where one of the patterns it serves matches (an alternation
    of them read from the candidate's first character: ``(?<=(?=...).)``, after the scanner's
    check of what they open with, :data:`_PRECHECKS`), so a candidate is settled inside ``re``:
    on the bundled 51 kB playbook 10.5k candidates, ~100k Python ``match`` calls, became 0
    (14 ms -> 9.6 ms; the nine scans themselves take most of the rest). Every position where a
    pattern matches is still a candidate of that pattern."""
    served = "|".join(
        _scoped(p.removesuffix(_ID_TAIL))
        for (_, p), n in zip(_PATTERN_SOURCES, _STARTS, strict=True)
        if n == name
    )
    check = f"(?={_PRECHECKS[name]})" if name in _PRECHECKS else ""
    return tuple(f"{scanner}(?<={check}(?=(?:{served})).)" for scanner in _SCANNER_SOURCES[name])


def _for_ascii(sources: tuple[str, ...]) -> tuple[str, ...]:
    """The finders that can match ASCII text, opening with ``[0-9]`` for ``\\d``: the same
    candidates there, and ``re`` scans a Latin-1 class faster than a category (``\\d`` over the
    51 kB playbook: 0.78 ms, ``[0-9]``: 0.52 ms)."""
    return tuple(
        "[0-9]" + p[2:] if p.startswith("\\d") else "[0-9" + p[3:] if p.startswith("[\\d") else p
        for p in sources
        if p[0].isascii()
    )


# Each regex is compiled when first needed, not all at a process's first check: an ASCII text
# never needs the finders of other text, and a pattern whose scanner found no candidate is never
# tried (compiling them all took 19-24 ms of a `ctxbudget assemble` process, regex compilation
# being Python code; the bundled playbook's check compiles about a third of them).
@functools.cache
def _pattern(index: int) -> re.Pattern[str]:
    return re.compile(_PATTERN_SOURCES[index][1])


@functools.cache
def _finders(name: str, ascii_only: bool) -> tuple[re.Pattern[str], ...]:
    if ascii_only and name in _READ_AS_WRITTEN:
        return ()
    sources = _finder_sources(name)
    return tuple(map(re.compile, _for_ascii(sources) if ascii_only else sources))


if TYPE_CHECKING:
    PATTERNS: tuple[tuple[str, re.Pattern[str]], ...]
    _SCANNERS: dict[str, tuple[re.Pattern[str], ...]]


def __getattr__(name: str) -> Any:
    """``PATTERNS`` (and the scanners), compiled on first use."""
    if name == "PATTERNS":
        return tuple((kind, _pattern(i)) for i, (kind, _) in enumerate(_PATTERN_SOURCES))
    if name == "_SCANNERS":
        return {name: tuple(map(re.compile, texts)) for name, texts in _SCANNER_SOURCES.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Scripts written without spaces between words (Han, kana, Hangul syllables): a value glued to
# them ("今日は2026-09-16です", "时间戳1726480331秒") stands apart from them as from punctuation, where
# ``\b`` reads a letter of theirs as one of the value's word ("今日は2026-09-16です" passed).
_UNSPACED = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]"


@functools.cache
def _unspaced() -> tuple[re.Pattern[str], regex.Pattern[str]]:
    """Whether a text holds a character from U+3040 on (``re``), and those scripts' letters
    (``regex``): compiled on first use by a text beyond ASCII. ``re`` compiles a class of wide
    ranges into a map of 65,536 code points in Python (7.8 ms a process, for every curly quote's
    playbook), ``regex`` in 0.14 ms but scans 5x slower: the cheap class tells first."""
    import regex  # here: a fit that never reads such a text does not load it

    return re.compile("[^\x00-\u303f]"), regex.compile(_UNSPACED)


# What such a letter is read as: neither a word character (``\b`` parts it from a value) nor
# whitespace (read as a space, a run of CJK words was one gap that a pattern's ``\s*`` crossed:
# "session id的前8位" was a session id, "case number在第1234页" a case number).
_APART = "\x00"


class _AsciiForms(dict[int, int]):
    """``str.translate``'s table of the characters a value is also written in: a full-width form
    (``２０２６－０９－１６``, ``Date：``) as its ASCII one, a decimal digit of any script (``١٦``,
    ``१६``) as its ASCII digit, any other character as itself (each looked up once)."""

    def __missing__(self, code: int) -> int:
        digit = unicodedata.decimal(chr(code), None)
        found = 0xFF01 <= code <= 0xFF5E
        value = code - 0xFEE0 if found else 0x30 + digit if digit is not None else code
        self[code] = value
        return value


_ASCII_FORMS = _AsciiForms()


@functools.cache
def _other_forms() -> re.Pattern[str]:
    """A full-width form, or a digit beyond ASCII (compiled on first use)."""
    return re.compile(r"[\uff01-\uff5e]|[^\x00-\x7f](?<=\d)")


def _spaced(text: str) -> str:
    """``text`` as the patterns read it, the same length (so every offset is the text's own):
    full-width forms and digits of other scripts as ASCII, and each letter of an unspaced script
    as :data:`_APART`; but for the pattern whose value is written in those characters
    (``2026年9月16日``), which reads the text itself."""
    if text.isascii():
        return text
    if _other_forms().search(text):
        text = text.translate(_ASCII_FORMS)
    wide, letters = _unspaced()
    if not wide.search(text) or not letters.search(text):
        return text
    return letters.sub(_APART, text)


# Scanners whose patterns all open, at a word start, with one of a few words (any case): in
# ASCII text their candidates are those words' word-start occurrences in the lower-cased text,
# found by ``str.find`` in C (a superset: each is then matched). Their finders, one class of
# frequent first letters (a, c, d, t, u, l; x, r, s, m), stopped at a third of the playbook's
# words: the time and now-word ones 2.2 and 1.8 ms of its 7.8 ms check, the id and case ones
# 0.75 and 0.35 ms, against 0.1-0.2 ms each this way. "time word" also serves an ISO time
# alone (``T10:32:11Z``), looked for as a capital T before a digit, and an ``@`` before a time.
_OPENING_WORDS = {
    "now word": (
        "today",
        "current",
        "date",
        "as of",
        "updated",
        "last updated",
        "the time is",
        "time",
        "local",
    ),
    "time word": ("at", "time", "as of", "updated", "generated"),
    "id word": ("x-", "req", "sess", "trace", "span", "run", "correlation", "conversation", "message", "msg"),
    "case word": ("case", "docket", "matter", "claim", "civil action"),
}
_ISO_TIME_START = re.compile(r"T(?=[0-2])")
_WORD_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


# Scanners whose patterns match a fixed shape of hex digits (a UUID's 8-4-4-4-12, a nonce's 16
# or more): in ASCII text their candidates are where that shape starts in the text with each hex
# digit written ``h``, found by ``str.find`` (``str.translate`` and ``find`` run in C). Their
# finders scanned the hex digits, a third of a playbook's characters: 0.6 and 0.46 ms of its
# check, against 0.03 ms each this way. A nonce's ``\b`` admits only the start of a run.
_HEX_SHAPES = {"uuid": "hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh", "hex": "h" * 16}
_HEX_MARKS = str.maketrans(
    {chr(c): "h" if chr(c) in "0123456789abcdefABCDEF" else chr(c) if c == 0x2D else " " for c in range(128)}
)
_HEX_RUN = re.compile("h+")


def _candidates(name: str, text: str) -> list[int]:
    """Where a pattern served by the scanner ``name`` matches in ``text``, in order."""
    opening = _OPENING_WORDS.get(name)
    if opening is not None and text.isascii():
        return _word_starts(name, text, opening)
    shape = _HEX_SHAPES.get(name)
    if shape is not None and text.isascii():
        return _shape_starts(text.translate(_HEX_MARKS), shape, runs_only=name == "hex")
    found: list[int] = []
    for finder in _finders(name, text.isascii()):
        words = _words_tried_at(finder)
        if words is None:
            found += map(re.Match.start, finder.finditer(text))
        else:
            found += (at for at in _occurrences(text, words) if finder.match(text, at))
    return sorted(found)


# Finders tried only where one of their words occurs (found by ``str.find``), not scanned for,
# by the class they open with: the date-word scanner's lower-case one opens with a class of the
# months' first letters, which stopped at a third of a playbook's letters (0.51 of its 0.74 ms
# scan; 0.06 ms so). Its look-ahead then asks for those words at the place, as before.
_TRIED_AT = {_LOWER_MONTH_CLASS: tuple(_LOWER_MONTH_STARTS.split("|"))}


@functools.cache  # read once a finder, not once a text
def _words_tried_at(finder: re.Pattern[str]) -> tuple[str, ...] | None:
    """The words :data:`_TRIED_AT` gives the class ``finder`` opens with, or None: it is scanned for."""
    return next((w for first, w in _TRIED_AT.items() if finder.pattern.startswith(first)), None)


def _occurrences(text: str, words: tuple[str, ...]) -> Iterator[int]:
    """Where each of ``words`` occurs in ``text`` (a word at a time)."""
    for word in words:
        at = text.find(word)
        while at >= 0:
            yield at
            at = text.find(word, at + 1)


def _shape_starts(marked: str, shape: str, *, runs_only: bool) -> list[int]:
    """Where ``shape`` starts in ``marked`` (``runs_only``: only where a run of ``h`` starts)."""
    found: list[int] = []
    at = marked.find(shape)
    while at >= 0:
        found.append(at)
        at = marked.find(shape, _HEX_RUN.match(marked, at).end() if runs_only else at + 1)  # type: ignore[union-attr]
    return found


def _word_starts(name: str, text: str, words: tuple[str, ...]) -> list[int]:
    """The word-start occurrences of ``words`` in the lower-cased ASCII ``text`` (and, for the
    time scanner, its ``@`` and ``T`` before a digit), sorted."""
    found = {
        at for at in _occurrences(text.lower(), words) if at == 0 or text[at - 1] not in _WORD_CHARACTERS
    }
    if name == "time word":
        found.update(_occurrences(text, ("@",)))
        found.update(m.start() for m in _ISO_TIME_START.finditer(text))
    return sorted(found)


@dataclass(frozen=True, kw_only=True, slots=True)
class VolatileRules:
    """Extra volatile-value patterns (kind, regex) and allow-listed regexes for the pinned tiers."""

    patterns: tuple[tuple[str, str], ...] = ()
    allow: tuple[str, ...] = ()


@dataclass(frozen=True)
class VolatileMatch:
    """The first volatile value found: its kind, text and character span."""

    kind: str
    value: str
    start: int
    end: int


class _Allowed:
    """The allowed spans, sorted, with the furthest end among those starting before each: a
    match is tested in log time (each match was tested against every span: a playbook repeating
    an allowed value, 704 kB, took 18 s)."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        spans.sort()
        self._starts = [a for a, _ in spans]
        self._reach = list(itertools.accumulate((b for _, b in spans), max))

    def overlaps(self, match: re.Match[str]) -> bool:
        """Whether some span starts before the match ends and ends after it starts."""
        before = bisect.bisect_left(self._starts, match.end())
        return before > 0 and self._reach[before - 1] > match.start()


def _allowed(text: str, allow: tuple[str, ...]) -> _Allowed:
    """The spans the policy's ``allow`` patterns match in ``text``, joined as each pattern is
    read: a value overlaps an allowed span exactly when it overlaps one of the joined. Every span
    was kept: a policy listing ``a`` 2,000 times held 2,000 spans at each "a" of the playbook
    (1.2 GB, 8 s); a pattern given twice is now read once, and one span at a place is kept."""
    union: list[tuple[int, int]] = []
    for regex in dict.fromkeys(allow):
        union = _joined(union, (m.span() for m in text_search(regex).finditer(text)))
    return _Allowed(union)


def _joined(union: list[tuple[int, int]], spans: Iterator[tuple[int, int]]) -> list[tuple[int, int]]:
    """``union`` (in order) with ``spans`` (in order: one pattern's matches) added, spans that
    overlap made one and a span given again dropped. Spans that only touch stay two: a value of no
    characters where they meet overlaps neither (a built-in pattern's match is never empty, but
    the test is the same for any)."""
    out: list[tuple[int, int]] = []
    for start, end in heapq.merge(union, spans):
        if out and (start < out[-1][1] or (start, end) == out[-1]):
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _first(pattern: TextSearch, text: str, allowed: _Allowed) -> re.Match[str] | None:
    """The first match of a policy's pattern that does not overlap an allowed span."""
    for match in pattern.finditer(text):
        if match.end() > match.start() and not allowed.overlaps(match):  # no value of no characters
            return match
    return None


def _first_scanned(
    pattern: re.Pattern[str], candidates: list[int], text: str, allowed: _Allowed, limit: int
) -> re.Match[str] | None:
    """What :func:`_first` returns if it starts before ``limit``, trying ``pattern`` only at
    ``candidates``: ``finditer`` finds the leftmost match at or after where the last one ended,
    and a match at a position is the same whether searched or matched there (lookbehinds and
    ``\b`` see the text before it either way)."""
    resume = 0
    for at in candidates:
        if at >= limit:
            return None
        if at < resume:
            continue
        match = pattern.match(text, at)
        if match is None:
            continue
        if not allowed.overlaps(match):
            return match
        resume = max(match.end(), at + 1)
    return None


@functools.lru_cache(maxsize=64)
def find_volatile(text: str, rules: VolatileRules | None = None) -> VolatileMatch | None:
    """The earliest volatile value in ``text`` outside the policy's allowed spans; at one place the
    earlier pattern (the more specific kind) wins. Cached by content: a pinned playbook is checked
    once, not every turn. One pattern at a time: a single alternation of them all measured slower
    in CPython's ``re`` (119 ms against 49 ms on the bundled 51 kB playbook); each is tried only
    where a match can start (``_SCANNERS``: 49 ms -> 19.5 ms) and one of them matches
    (``_FINDERS``: -> 9.6 ms), and not past a match found."""
    rules = rules or VolatileRules()
    allowed = _allowed(text, rules.allow)
    found: VolatileMatch | None = None
    spaced = _spaced(text)
    read = {name: text if name in _READ_AS_WRITTEN else spaced for name in dict.fromkeys(_STARTS)}
    candidates = {name: _candidates(name, read[name]) for name in read}
    for index, ((kind, _), name) in enumerate(zip(_PATTERN_SOURCES, _STARTS, strict=True)):
        limit = len(text) + 1 if found is None else found.start
        starts = candidates[name]
        if not starts or starts[0] >= limit:
            continue  # not tried: not compiled
        match = _first_scanned(_pattern(index), starts, read[name], allowed, limit)
        if match:
            value = text[match.start() : match.end()].strip()
            found = VolatileMatch(kind, value, match.start(), match.end())
    for kind, regex in rules.patterns:
        match = _first(text_search(regex), text, allowed)
        if match and (found is None or match.start() < found.start):
            found = VolatileMatch(kind, match.group().strip(), match.start(), match.end())
    return found
