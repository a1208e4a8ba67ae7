"""Sentence boundaries for legal and business prose, by an abbreviation-aware regex.

Measured on this machine kind (../shared/notes/dependencies.md): an abbreviation-aware regex
split held-out legal cases better than pysbd (11/14), blingfire (12/14) and syntok (9/14), and
ran about 140x faster than pysbd on 400 KB (pysbd is also superlinear), so we keep our own.

A sentence ends after ``.``, ``!`` or ``?`` (and closing quotes or brackets) followed by
whitespace, unless the word before the period is a known abbreviation ("Mr.", "No. 12",
"Fed. R. Civ. P."), an initial ("J."), a dotted abbreviation ("U.S.C."), or the next word
starts in lower case. A newline ends a sentence, and so do the full stops of scripts that have
their own (:data:`WIDE_ENDS`: the CJK marks ``。！？``, the Devanagari danda ``।``, the Arabic
question mark ``؟`` and the Urdu full stop ``۔``, ...), which no abbreviation takes.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import NamedTuple

__all__ = ["extends", "iter_sentence_ends", "last_sentence_end", "sentence_ends"]

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
        # a record's and a party's: Tr. 47:12, Smith Dep. 12:3, Jones Decl. ¶ 4, Compl. ¶ 12,
        # Def. Mot. at 4, Pl. Ex. 4 (not a brief's Mot., Opp., Stip., words that end sentences:
        # "See Def.'s Mot. The motion is denied." is two)
        "def",
        "defs",
        "pl",
        "pls",
        "tr",
        "dep",
        "depo",
        "decl",
        "compl",
        "aff",
        "pp",
        "ln",
        # German legal and everyday ones: § 5 Nr. 3, vgl., bzw., ggf., usw. (not "Abs." or "gem.",
        # English words too: "The ruling was a gem. The court agreed." is two sentences)
        "nr",
        "vgl",
        "bzw",
        "ggf",
        "usw",
        "inkl",
        "ziff",
        "evtl",
        "sog",
        # Spanish and French numbered ones: núm. 3, pág. 12 (art., p., chap. are above)
        "núm",
        "pág",
        "págs",
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
        "jän",
        "mär",
        "okt",
        "dez",
        "am",
        "pm",
        "est",
    ]
)

MAX_WORD = 40
DOTTED_SETTLED = 5  # letters of a dotted abbreviation settled in ``re`` (more are asked of Python)
# A sentence end: ``[.!?]+`` and closing quotes before whitespace, ``[。！？]+`` and closing
# quotes, or a newline. Written to open with one character class so that ``re`` skips to the
# next candidate character in C (a pattern opening with a repeat or an alternation of classes is
# tried at every position: 3-6x slower on a 265 kB transcript); the lookbehinds pick the branch.
# A ``[.!?]`` run is tried at its first character only (``_RUN_START``): tried at each of its
# characters, a run not followed by whitespace was read to its end from every one of them
# (57,000 dots took 28 s). Every later start fails where the first did (same end, and giving
# characters back leaves a ``[.!?]`` that neither a closer nor whitespace matches), so the ends
# are the same; a scan that starts inside a run is served by :func:`_end_matches`.
_RUN_START = "(?<![.!?][.!?])"
# The sentence ends of scripts with their own: CJK 。！？, Devanagari (Hindi, Marathi, Nepali,
# and Bengali's) danda and double danda, Arabic question mark and Urdu full stop, Armenian full
# stop, Ethiopic full stop and question mark, Myanmar section mark. Hindi was cut mid-sentence
# by the token fallback, its 10-token sentences never found.
WIDE_ENDS = "。！？\u0964\u0965\u061f\u06d4\u0589\u1362\u1367\u104b"
# What closes a quote or a bracket after such an end, kept with its sentence: CJK corner brackets,
# curly quotes, guillemets (Arabic and French quote with them), and a straight quote before
# whitespace or the end (with none it opens the next sentence: 他走了。"你好，"她说。).
WIDE_CLOSING = "(?:[」』”’)»›]|[\"'](?=\\s|\\Z))*"


_END = re.compile(
    rf"[.!?{WIDE_ENDS}\n](?:(?<=[.!?]){_RUN_START}[.!?]*[\"'”’)\]]*(?=\s)|(?<=[{WIDE_ENDS}])[{WIDE_ENDS}]*{WIDE_CLOSING}|(?<=\n))"
)


@functools.cache
def _anywhere(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """``pattern`` without the run-start rule: for the one position a scan starts at."""
    return re.compile(pattern.pattern.replace(_RUN_START, ""))


def _end_matches(pattern: re.Pattern[str], text: str, start: int, endpos: int) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text, start, endpos)`` as if a match could begin anywhere in a run:
    a scan that starts inside a ``[.!?]`` run tries that position first (a run's later
    characters fail where its first did, so they need no try)."""
    if 0 < start < endpos and text[start - 1] in ".!?" and text[start] in ".!?":
        first = _anywhere(pattern).match(text, start, endpos)
        if first is not None:
            return itertools.chain((first,), pattern.finditer(text, first.end(), endpos))
    return pattern.finditer(text, start, endpos)


_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_CLOSERS = "\"'”’)]"
_DOTTED = re.compile(r"(?:[a-z]\.)+[a-z]?")


def _is_abbreviation(text: str, dot: int) -> bool:
    # Every abbreviation, initial and dotted form ends in a letter or a dot: any other character
    # before the dot (a digit, a quote, a space) settles it without reading the word.
    if not dot or not (text[dot - 1].isalpha() or text[dot - 1] == "."):
        return False
    if dot >= 2 and text[dot - 2] in " \n\t" and text[dot - 1] in _ASCII_LETTERS:
        return True  # an initial ("Q.", "J."): the most common case in a transcript
    # Only a short window before the dot is read, so splitting stays linear in the text.
    lo = max(0, dot - MAX_WORD)
    start = max(text.rfind(" ", lo, dot), text.rfind("\n", lo, dot), text.rfind("\t", lo, dot)) + 1
    word = text[max(start, lo) : dot].lstrip("([\"'“‘").lower()
    if word[1:2] in ("'", "’") and word[0] in "ld":  # French elision: L'art. 1240, d'al. 2
        word = word[2:]
    if not word:
        return False
    if word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        return True
    return "." in word and bool(_DOTTED.fullmatch(word))


# A German ordinal (a day, a chamber: "am 3. März 2026", "der 2. Senat") or a German citation's
# number after its word ("§ 3 Abs. 2", "Rn. 12"): the dot is no sentence end, though a capital or
# a digit follows (each was cut as a sentence: "Der Vertrag wurde am 3." and "März 2026 ...").
# A day before a German month's name, or a year after a name English shares (April, August, ...);
# an ordinal after an article or a preposition of German's; "Abs.", "Rn." before a number ("abs"
# is an English word too: "Abs. The" still ends).
_GERMAN_MONTH = re.compile(
    r"\s+(?:(?:Januar|Jänner|Februar|Feber|März|Mai|Juni|Juli|Oktober|Dezember)\b"
    r"|(?:April|August|September|November|Jan\.|Feb\.|Apr\.|Aug\.|Sept?\.|Okt\.|Nov\.|Dez\.)\s+\d{4}\b)"
)
_GERMAN_ORDINAL_WORDS = frozenset(
    ["der", "die", "das", "den", "dem", "des", "am", "im", "vom", "zum", "zur", "beim"]
)
_NUMBERED_WORDS = frozenset(["abs", "rn", "rdnr", "rz"])
_CAPITAL = re.compile(r"\s+[^\W\d_]")
_NUMBER = re.compile(r"\s+\d")


def _word_before(text: str, end: int) -> str:
    """The lower-cased word ending at ``end`` (after a blank or a bracket), or "" when it is longer
    than any listed word (only 8 characters are read)."""
    start = max(0, end - 8)
    head = text[start:end]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"), head.rfind("("))
    return "" if cut < 0 and start > 0 else head[cut + 1 :].lower()


def _is_german_number(text: str, dot: int) -> bool:
    """Whether the dot at ``dot`` closes a German ordinal or a citation word before its number."""
    digits = dot
    while digits > 0 and dot - digits < 3 and "0" <= text[digits - 1] <= "9":
        digits -= 1
    if dot - digits in (1, 2):  # a day or an ordinal, not a year
        if digits and (text[digits - 1].isalnum() or text[digits - 1] in "._"):
            return False
        if _GERMAN_MONTH.match(text, dot + 1):
            return True
        return (
            digits > 0
            and text[digits - 1] == " "
            and _word_before(text, digits - 1) in _GERMAN_ORDINAL_WORDS
            and bool(_CAPITAL.match(text, dot + 1))
        )
    return dot == digits and _word_before(text, dot) in _NUMBERED_WORDS and bool(_NUMBER.match(text, dot + 1))


def _continues_lowercase(text: str, end: int) -> bool:
    rest = text[end : end + 8].lstrip()
    return bool(rest) and rest[0].islower()


def _is_end(text: str, begin: int, end: int) -> bool:
    """Whether the ``[.!?]`` run matched at ``begin:end`` ends a sentence (the plain rule)."""
    single = end - begin == 1 or text[begin:end].rstrip(_CLOSERS) == "."
    if text[begin] == "." and single and (_is_abbreviation(text, begin) or _is_german_number(text, begin)):
        return False
    return not _continues_lowercase(text, end)


def _either_case(words: list[str]) -> str:
    """Lower-case ASCII words of one length as a regex of either case, factored letter by letter:
    every branch opens with a character class, which ``re`` rejects without entering it (an
    ``(?i)`` alternation of the 95 abbreviations tried each branch: 1.5 ms of the split)."""
    if not words[0]:
        return ""
    rests: dict[str, list[str]] = {}
    for word in words:
        rests.setdefault(word[0], []).append(word[1:])
    branches = [f"[{c}{c.upper()}]{_either_case(rest)}" for c, rest in sorted(rests.items())]
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


def _german_candidates() -> str:
    """What :func:`_is_german_number` may take, to ask it in Python (a lookaround after the dot):
    a day before a month's first letters, an ordinal after a listed word and before a capital,
    a listed citation word before a digit. Narrowed in ``re`` so that a transcript's sentence end
    before a line number, or "page 3. The", is settled there as before."""

    def after(words: frozenset[str], tail: str) -> str:
        by_length: dict[int, list[str]] = {}
        for w in sorted(words):
            by_length.setdefault(len(w), []).append(w)
        return "|".join(
            rf"(?<=(?<![^ \n\t(]){_either_case(ws)}{tail})" for _, ws in sorted(by_length.items())
        )

    months = r"(?=\s+(?:Jan|Jän|Feb|Mär|Apr|Mai|Jun|Jul|Aug|Sep|Okt|Nov|Dez))"
    ordinal = "|".join(after(_GERMAN_ORDINAL_WORDS, rf" {d}\.") for d in ("[0-9]", "[0-9]{2}"))
    numbered = after(_NUMBERED_WORDS, r"\.")
    # one character's test first (most dots follow neither a digit nor these letters)
    return (
        rf"(?<=[0-9nrszNRSZ]\.)(?:(?<=[0-9]\.)(?<![0-9]{{3}}\.)(?:{months}|(?=\s+[^\W\d_])(?:{ordinal}))"
        rf"|(?=\s+[0-9])(?:{numbered}))"
    )


# A ``[.!?]`` run whose closers are followed by a newline ends, or not, where that newline does:
# the newline's own match gives the same end whatever the run's rule says, so the run is dropped
# before its abbreviation look-behinds are read (a transcript's answers end their lines).
_BEFORE_NEWLINE = "(?![.!?]*[\"'”’)\\]]*\n)"


class _Branches(NamedTuple):
    """What the settled rule asks after each kind of candidate (see :func:`_settled_end_pattern`)."""

    newline: str  # after a newline
    dot: str  # after a single dot
    run: str  # after the first character of a ``[.!?]`` run
    wide: str  # after a wide end mark (``WIDE_ENDS``)


@functools.cache  # built when a text is first split (0.3 ms; compiling its patterns, 5 ms)
def _branches() -> _Branches:
    """The rule's branches, each opening with a look-behind at its candidate character."""
    by_length: dict[int, list[str]] = {}
    for word in sorted(ABBREVIATIONS):
        by_length.setdefault(len(word), []).append(word)
    known = "".join(rf"|(?<=[ \n\t]{_either_case(words)}\.)" for _, words in sorted(by_length.items()))
    dotted = "".join(rf"|(?<=[ \n\t](?:[A-Za-z]\.){{{n}}}[A-Za-z]\.)" for n in range(1, DOTTED_SETTLED))
    abbreviation = rf"(?:(?<=[ \n\t][A-Za-z]\.){known}{dotted})"
    longest = max(by_length)
    plain = "".join(rf"|(?<=[ \n\t][A-Za-z]{{{k}}}\.)" for k in range(2, longest + 1))
    numbered = "".join(rf"|(?<=[0-9][A-Za-z]{{{k}}}\.)" for k in range(1, longest + 1))
    word = rf"(?:(?<=[\x00-\x2d\x2f-\x40\x5b-\x60\x7b-\x7f]\.)|(?<=[A-Za-z]{{{longest + 1}}}\.){plain}{numbered})"
    closers = "[\"'”’)\\]]*(?=\\s)"
    german = _german_candidates()

    def settled(group: str) -> str:  # not before ASCII lower case; before non-ASCII, ask Python
        return rf"(?!\s{{0,7}}[a-z])(?:(?=\s{{0,7}}[^\s\x00-\x7f])(?P<{group}>)|)"

    return _Branches(
        newline=r"(?<=\n)(?P<nl>)",
        dot=rf"(?<=\.)(?=[\"'”’)\]]*\s){_BEFORE_NEWLINE}(?!{abbreviation})(?:(?={word})(?!{german}){closers}{settled('lower')}|(?!{word}){closers}(?P<check>)|(?={german})(?P<german>))",
        run=rf"(?<=[.!?])(?!(?<=\.)(?![.!?])){_RUN_START}{_BEFORE_NEWLINE}[.!?]*{closers}{settled('lower_run')}",
        wide=rf"(?<=[{WIDE_ENDS}])[{WIDE_ENDS}]*{WIDE_CLOSING}",
    )


@functools.cache
def _settled_end_pattern() -> re.Pattern[str]:
    """``_END`` with the plain rule's common answers settled inside ``re``.

    Measured on the legal example's 105 transcript pages (267 kB, 10.5k end candidates): the rule
    read in a Python loop took 17.6 ms. Here a single dot after an initial or a known abbreviation
    preceded by a space is skipped by lookbehinds, a run followed by an ASCII lower-case letter
    by a lookahead, and what the lookarounds cannot settle (a word not preceded by a space, a
    dotted word, non-ASCII around the end) is matched with a group (``check``, ``lower``, ``lower_run``) for
    :func:`_is_end`. A run skipped at its first character is skipped at every later one (same
    end, same lower-case test), so the matches are the plain loop's ends (property test). A
    dotted abbreviation after a space (``U.S.``, ``U.C.C.``: of up to :data:`DOTTED_SETTLED`
    letters) is skipped too, and a word of letters after a digit (``25th.``, ``4th.``: no
    abbreviation holds a digit) settled as a long word is: on those 105 pages they were all of
    the 500 ends asked of Python (2.5 µs each). A single dot is first asked for the closers and
    the whitespace every one of its branches needs after it, so a decimal point or a dotted
    number is rejected there (420 -> 90 ns a dot), not after every abbreviation's look-behind.
    ASCII text is scanned by :func:`_ascii_end_patterns`, one candidate character at a time.
    """
    b = _branches()
    return re.compile(f"[.!?{WIDE_ENDS}\n](?:{b.newline}|{b.dot}|{b.run}|{b.wide})")


@functools.cache
def _ascii_end_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """:func:`_settled_end_pattern`'s branches for ASCII text, one pattern a candidate character.

    ``re`` looks for a pattern's one opening character like ``str.find`` (the 105 pages: a
    newline's 3,122 places in 0.4 ms), but for a class of two or more by testing the class at
    each character: ``[.!?\n]`` took 3.0 ms to find its 12,555 places, most of the split. A
    newline ends where it stands, so its places are read alone; a dot opens a pattern of its own,
    and so does a question mark, which reads an exclamation mark's places too (the rule tells the
    two apart nowhere: :func:`_settled_ends` scans a copy with each ``!`` made ``?``; compiling a
    pattern of its own cost a process's first split 0.3-0.8 ms). Every end keeps its place in the
    merge (:func:`_settled_ends`): the same ends as one scan, as a match never covers a candidate
    that another could take (a run's later characters fail where its first did)."""
    b = _branches()
    return re.compile(rf"\.(?:{b.dot}|{b.run})"), re.compile(rf"\?(?:{b.run})")


_NEWLINE = re.compile("\n")


def _ends_of(text: str, matches: Iterable[re.Match[str]], ends: list[int]) -> None:
    """Append the end each settled match gives (a newline's at itself; a match with a group where
    :func:`_is_end` says so)."""
    for match in matches:
        kind = match.lastgroup
        if kind is None:
            ends.append(match.end())
        elif kind == "nl":
            ends.append(match.start())
        elif _is_end(text, match.start(), match.end()):
            ends.append(match.end())


# What a character a sentence end stands before may be when it belongs to the end's cluster
# (Unicode's Extend, SpacingMark and ZWJ: marks, joiners, variation selectors, emoji modifiers
# and tags): only such an end is looked at again.
_EXTENDING = frozenset({"Mn", "Mc", "Me", "Cf", "Sk"})


def _whole_clusters(text: str, ends: list[int]) -> list[int]:
    """``ends`` moved past what extends the character before each (an accent after 。 is one
    user-perceived character with it: the end fell inside it and a cut there left the accent to
    the next sentence). The ends a wide mark (``WIDE_ENDS``) gives need no whitespace after it,
    so a text beyond ASCII may have one where another character's mark stands."""
    size = len(text)
    after = {text[e] for e in ends if e < size}  # a few distinct characters: each asked once
    if not any(map(extends, after)):
        return ends
    return [_cluster_end(text, e) for e in ends]


def _cluster_end(text: str, end: int) -> int:
    """``end``, or past what extends the character before it (see :func:`_whole_clusters`)."""
    if end >= len(text) or not extends(text[end]):
        return end
    from .text import grapheme_ceil  # the cluster pattern compiles at the first such end

    return grapheme_ceil(text, end)


# Letters by their category that extend a cluster all the same (Unicode's SpacingMark and Extend):
# Thai and Lao SARA AM, and the halfwidth katakana sound marks.
_EXTENDING_LETTERS = frozenset("\u0e33\u0eb3\uff9e\uff9f")


def extends(char: str) -> bool:
    """Whether ``char`` may extend the character before it (none in ASCII does)."""
    return char > "\x7f" and (unicodedata.category(char) in _EXTENDING or char in _EXTENDING_LETTERS)


def _settled_ends(text: str, start: int) -> list[int]:
    """:func:`iter_sentence_ends` from ``start`` to the text's end, as a list, with the rule mostly
    settled in ``re``. One scan's ends never decrease (a match starts where the last ended or
    later), and they repeat only where a newline ends a sentence a run just before it ended: the
    ends of the scans merged are the distinct ones past ``start`` and the first visible
    character, in order (what one scan of every candidate keeps)."""
    last = max(start, len(text) - len(text.lstrip()))
    ends: list[int] = []
    if not text.isascii():
        _ends_of(text, _end_matches(_settled_end_pattern(), text, start, len(text)), ends)
        ends = _whole_clusters(text, ends)
    else:
        dot, mark = _ascii_end_patterns()
        marks = text.replace("!", "?") if "!" in text else text  # the same places, one scan
        begin = start
        if 0 < start < len(text) and text[start - 1] in ".!?" and text[start] in ".!?":
            # a scan inside a run: its character's pattern without the run-start rule, there
            at_dot = text[start] == "."
            first = _anywhere(dot if at_dot else mark).match(text if at_dot else marks, start)
            if first is not None:
                _ends_of(text, (first,), ends)
                begin = first.end()
        ends += (match.start() for match in _NEWLINE.finditer(text, begin))
        _ends_of(text, dot.finditer(text, begin), ends)
        _ends_of(text, mark.finditer(marks, begin), ends)
    return sorted({end for end in ends if end > last})


def _plain_ends(text: str, start: int, stop: int) -> Iterator[int]:
    """Candidate ends in ``[start, stop + 1)`` by the rule read in Python (the definition)."""
    # Look a little past ``stop`` so the whitespace lookahead sees what follows.
    for match in _end_matches(_END, text, start, min(len(text), stop + 1)):
        begin, end = match.span()
        first = text[begin]
        if first == "\n":
            yield begin
        elif first not in ".!?" or _is_end(text, begin, end):
            yield _cluster_end(text, end)


def sentence_ends(text: str) -> list[int]:
    """Character offsets where sentences end (exclusive; trailing whitespace not included)."""
    return _settled_ends(text, 0)


def iter_sentence_ends(text: str, start: int = 0, stop: int | None = None) -> Iterator[int]:
    """Sentence ends in ``(start, stop]``, in order, lazily."""
    stop = len(text) if stop is None else stop
    if stop >= len(text):  # the settled pattern's lookaheads read past ``stop``
        yield from _settled_ends(text, start)
        return
    first_visible = len(text) - len(text.lstrip())
    last = start
    for end in _plain_ends(text, start, stop):
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
