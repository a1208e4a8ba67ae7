"""Regular expressions given as data (a policy's volatile patterns, a catalog's match rules):
refused before they run when they repeat a repetition, the backtracking that makes a pattern take
exponential time on a text it does not match, and searched over long texts so that a pattern
opening with a repeat (``\\S+@``) reads each run of its characters once (:class:`TextSearch`)."""

from __future__ import annotations

import functools
import re
import re._constants as _sre_c  # type: ignore[import-not-found]  # a pattern parsed, checked before it runs
import re._parser as _sre  # type: ignore[import-not-found]
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "NESTED_REPEAT_HINT",
    "TextSearch",
    "parse_warning",
    "repeats_a_repetition",
    "slow_pattern_hint",
    "text_search",
]

NESTED_REPEAT_HINT = (
    "repeats a repetition, alternatives or an optional part (such as (a+)+, (a?a?)* or (a|a)*): on "
    "a text it does not match it can take exponential time; repeat it once, or make the inner "
    "one possessive (a++)"
)
COUNTED_REPEAT_HINT = (
    "holds an unbounded repeat inside a counted one (such as (.*a){12}): on a text it does not "
    "match it takes time of the count's power; bound the inner repeat, or make it possessive (.*+)"
)
SEPARATED_REPEAT_HINT = (
    "repeats characters that the part after the repeat also matches, then repeats them again before "
    "a part that can fail (such as \\S+@\\S+\\.com, where \\S also matches the @): on a long run of "
    "such characters it takes polynomial time; leave the separator out of the repeats "
    "([^\\s@]+@[^\\s@]+\\.com)"
)
ADJACENT_REPEAT_HINT = (
    "has two unbounded repeats over the same characters with nothing between them that must match "
    "(such as \\w*\\w* or \\w+\\s?\\w+): on a long run of such characters it takes polynomial time; "
    "join them into one, put a required character between them, or make the first possessive (\\w++)"
)


def parse_warning(pattern: str, flags: int = 0) -> str | None:
    """What Python warns of when it parses ``pattern``, or None (also when it does not parse:
    compiling it says why). ``[[:digit:]]`` is "Possible nested set at position 1": a set whose
    meaning later Pythons change, and not the POSIX class it looks like. Checked before the
    pattern is compiled, so the warning, with its file and source line, never reaches stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            _sre.parse(pattern, flags)
        except (FutureWarning, DeprecationWarning) as exc:
            return str(exc)
        except re.error:
            return None
    return None


def slow_pattern_hint(pattern: str, long_texts: bool = False) -> str | None:
    """What makes ``pattern`` (which compiles) slow on a text it does not match, as a message's
    end, or None when nothing does (see :func:`repeats_a_repetition`). ``long_texts``: the
    pattern is searched over whole documents (a policy's volatile patterns), not over a model id
    of at most 256 characters, so two repeats that a separator's characters join, before a part
    that can fail, are refused too: ``\\S+@\\S+\\.\\S+`` took 5 s on a 51 kB run of ``ab@``
    (``\\S+@\\S+`` alone matches at the first split it tries, and is kept)."""
    parsed = _sre.parse(pattern)
    if _nested(parsed, counted=False, inside=False, exponential_only=True):
        return NESTED_REPEAT_HINT
    if _nested(parsed):
        return COUNTED_REPEAT_HINT
    if _adjacent(parsed):
        return ADJACENT_REPEAT_HINT
    return SEPARATED_REPEAT_HINT if long_texts and _adjacent(parsed, separated=True, whole=True) else None


def repeats_a_repetition(pattern: str) -> bool:
    """Whether an unbounded repeat of ``pattern`` (which compiles) holds a part that can match in
    more than one way: another repeat of variable length (``(a+)+``, ``(a*b*)*``, ``(a?a?)*``) or
    alternatives (``(a|a)*``). Each lets the engine split the same text between the repeats in
    exponentially many ways before it gives up: ``(a+)+$`` on 32 a's and a ``!`` ran for minutes,
    ``^(h?h?)*x$`` on 22 h's for 18 s. So is an unbounded repeat inside a counted one
    (``(.*a){12}``: polynomial, of the count's degree), and two unbounded repeats side by side
    whose characters overlap (``\\w*\\w*X``: 11 s on 3,000 characters; ``\\d+\\s*`` is fine).
    Conservative (``(foo|bar)*`` is refused too, though its
    alternatives never overlap); possessive repeats and atomic groups never backtrack into
    themselves, so they are safe. :func:`slow_pattern_hint` says which of these it is."""
    return slow_pattern_hint(pattern) is not None


def _nested(parsed: Any, inside: bool = False, counted: bool = False, exponential_only: bool = False) -> bool:
    """``inside``: within an unbounded repeat; ``counted``: within a repeat of a fixed or bounded
    count above 1, where an unbounded inner repeat splits the text in polynomially many ways,
    of the count's degree (``(.*a){12}x`` on 40 a's ran for minutes); ``exponential_only``: only
    what repeats inside an unbounded repeat (the counted case is left out)."""
    for op, value in parsed:
        if op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT):
            low, high, body = value
            unbounded = high == _sre_c.MAXREPEAT
            if (inside and (unbounded or low != high)) or (counted and unbounded and not exponential_only):
                return True
            if _nested(body, inside or unbounded, counted or high > 1, exponential_only):
                return True
        elif op in (_sre_c.POSSESSIVE_REPEAT, _sre_c.ATOMIC_GROUP):
            continue
        elif _risky_group(op, value, inside, counted, exponential_only):
            return True
    return False


def _risky_group(op: Any, value: Any, inside: bool, counted: bool, exponential_only: bool = False) -> bool:
    """Alternatives inside an unbounded repeat, or a group or alternative that holds a risky part."""
    if op == _sre_c.BRANCH:
        return inside or any(_nested(branch, inside, counted, exponential_only) for branch in value[1])
    return bool(op == _sre_c.SUBPATTERN and _nested(value[-1], inside, counted, exponential_only))


# Characters to tell whether two one-character matchers overlap: ASCII, and a few others of the
# classes \w, \d and \s reach beyond it.
_PROBES = [chr(c) for c in range(128)] + ["é", "ß", "日", "\u00a0", "\u2003", "\u0663", "\u200d"]


def _adjacent(parsed: Any, separated: bool = False, whole: bool = False) -> bool:
    """Whether two unbounded repeats of one-character matchers stand side by side (in any group),
    or with only optional parts between them (``\\w+\\s?\\w+``: the ``\\s?`` may match nothing),
    and some character matches both: the engine splits a run of such characters between them in
    as many ways as it is long, at every start (polynomial backtracking; three such repeats,
    ``\\w+\\s?\\w+\\s?\\w+!``, took 52 s on 800 characters).

    ``separated``: also when what stands between them is one-character matchers (``@``,
    ``.{1,2}``, ``(?:at|@)``), optional parts and assertions, and some character matches them
    together with both repeats: a run of it is split as many ways (``\\S+@\\S+\\.x`` on ``@@@...``).
    Such a pair is slow only when something after it can fail (``\\S+@\\S+`` alone matches at the
    first split it tries), so in the ``whole`` pattern it is refused only when a part that must
    match follows it; inside a group or a repeat, always (what follows the group is not seen)."""
    parts = list(_flat(parsed))
    before: set[str] = set()  # what the unbounded repeats that may end right here match
    # ``separated``: what the repeats before the separators since match, and each separator's
    # characters; a run of a string the separators can spell, in characters all three match,
    # joins that repeat with the next one (``\\S+://\\S+`` on ``://://...``)
    joined: set[str] = set()
    separators: list[set[str]] = []
    for at, (op, value) in enumerate(parts):
        matched = _unbounded_chars(op, value)
        if matched is not None and matched & before:
            return True
        if (
            matched is not None
            and matched & joined
            and all(sep & joined & matched for sep in separators)
            and (not whole or _must_match(parts[at + 1 :]))
        ):
            return True
        if op == _sre_c.BRANCH and any(_adjacent(branch, separated) for branch in value[1]):
            return True
        if op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT) and _adjacent(value[2], separated):
            return True
        optional = _optional(op, value)
        if matched is not None:
            before = matched | (before if optional else set())
            if separated:
                joined, separators = (matched | joined, separators) if optional else (matched, [])
            continue
        if not optional:  # a part that takes at least one character parts them
            before = set()
        if separated and not optional and op not in _ZERO_WIDTH:
            through = _separator_chars(op, value)
            if through is None or not joined:
                joined, separators = set(), []
            else:
                separators.append(through)
    return False


_ZERO_WIDTH = (_sre_c.AT, _sre_c.ASSERT, _sre_c.ASSERT_NOT)


def _optional(op: Any, value: Any) -> bool:
    """Whether a part may match no characters (and so cannot fail): a repeat of at least none, or
    alternatives one of which is empty."""
    return (op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT) and value[0] == 0) or (
        op == _sre_c.BRANCH and any(not list(branch) for branch in value[1])  # (?:\s|)
    )


def _must_match(parts: list[tuple[Any, Any]]) -> bool:
    """Whether any of ``parts`` can fail: one that is not optional (an assertion can fail too)."""
    return any(not _optional(op, value) for op, value in parts)


def _separator_chars(op: Any, value: Any) -> set[str] | None:
    """The probe characters a required separator can consist of: a one-character matcher, a
    bounded repeat of one, or alternatives made only of such matchers (``(?:at|@)``); None for
    anything else (it parts the repeats)."""
    if op == _sre_c.BRANCH:
        chars: set[str] = set()
        for branch in value[1]:
            for inner_op, inner_value in _flat(branch):
                found = _single_chars(inner_op, inner_value)
                if found is None:
                    return None
                chars |= found
        return chars
    return _single_chars(op, value)


def _single_chars(op: Any, value: Any) -> set[str] | None:
    """The probe characters a one-character matcher, or a bounded repeat of one, matches (None
    for anything else)."""
    if op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT, _sre_c.POSSESSIVE_REPEAT):
        body = list(value[2])
        if value[1] == _sre_c.MAXREPEAT or len(body) != 1:
            return None
        op, value = body[0]
    return _matcher_chars(op, value)


def _flat(parsed: Any) -> Any:
    """The parts of ``parsed`` with groups opened in place: ``(\\w+)(\\w+)`` is ``\\w+\\w+`` to the
    engine's backtracking (a group hid the repeats from their neighbours: 134 s on 800
    characters)."""
    for op, value in parsed:
        if op == _sre_c.SUBPATTERN:
            yield from _flat(value[-1])
        else:
            yield op, value


def _unbounded_chars(op: Any, value: Any) -> set[str] | None:
    """The probe characters an unbounded repeat of one one-character matcher matches (None for
    anything else)."""
    if op not in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT) or value[1] != _sre_c.MAXREPEAT:
        return None
    body = list(value[2])
    return _matcher_chars(*body[0]) if len(body) == 1 else None


def _matcher_chars(kind: Any, arg: Any) -> set[str] | None:
    """The probe characters a one-character matcher matches (None for anything else)."""
    if kind not in (_sre_c.LITERAL, _sre_c.NOT_LITERAL, _sre_c.ANY, _sre_c.IN):
        return None
    return {c for c in _PROBES if _matches(kind, arg, c)}


def _matches(kind: Any, arg: Any, char: str) -> bool:
    if kind == _sre_c.LITERAL:
        return bool(ord(char) == arg)
    if kind == _sre_c.NOT_LITERAL:
        return bool(ord(char) != arg)
    if kind == _sre_c.ANY:
        return char != "\n"
    negated = bool(arg) and arg[0][0] == _sre_c.NEGATE
    hit = any(
        _in_item(item_kind, item_arg, char) for item_kind, item_arg in arg if item_kind != _sre_c.NEGATE
    )
    return hit != negated


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


_CATEGORIES: dict[str, Callable[[str], bool]] = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_NOT_DIGIT": lambda char: not char.isdigit(),
    "CATEGORY_SPACE": str.isspace,
    "CATEGORY_NOT_SPACE": lambda char: not char.isspace(),
    "CATEGORY_WORD": _is_word,
    "CATEGORY_NOT_WORD": lambda char: not _is_word(char),
}


def _in_item(kind: Any, arg: Any, char: str) -> bool:
    if kind == _sre_c.LITERAL:
        return bool(ord(char) == arg)
    if kind == _sre_c.RANGE:
        return bool(arg[0] <= ord(char) <= arg[1])
    if kind == _sre_c.CATEGORY:
        test = _CATEGORIES.get(str(arg))
        return True if test is None else bool(test(char))  # an unknown category: assume it may
    return True  # anything else: assume it may match


_REPEATS = (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT, _sre_c.POSSESSIVE_REPEAT)
_GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))*")
_CATEGORY_SOURCES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}


@dataclass(frozen=True)
class TextSearch:
    """A pattern to search long texts with, as ``finditer`` finds its matches.

    CPython's ``re`` tries a pattern at every position, so one that opens with an unbounded repeat
    of one character class (``\\S+@``, ``[^\\s@]+@[^\\s@]+\\.[a-z]+``, ``\\w+\\.\\w+``) reads a run of
    that class from each of its positions to the run's end: on a 51 kB run without its separator,
    4-11 s; a 1 MB minified JSON would take hours. A match that starts inside such a run also
    starts one character earlier (the repeat takes that character as well, and what follows it
    matches the same text), so the leftmost match starts where the search resumes or just after
    a character the class does not match. ``run_start`` is the pattern behind a lookbehind that
    says so; it is tried after the plain pattern at the resume position, and each run is read
    once (the same 51 kB texts: under 10 ms). None when the pattern does not open with such a
    repeat, or refers back to a group (what ``\\1`` matches depends on where the match starts)."""

    pattern: re.Pattern[str]
    run_start: re.Pattern[str] | None

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """The matches ``self.pattern.finditer(text)`` yields, for patterns that match no empty
        text (a policy refuses those); others are read by ``finditer`` itself."""
        if self.run_start is None:
            yield from self.pattern.finditer(text)
            return
        at = 0
        while at <= len(text):
            found = self.pattern.match(text, at) or self.run_start.search(text, at + 1)
            if found is None:
                return
            if found.end() == found.start():  # a pattern that matches the empty text: re's own way
                yield from self.pattern.finditer(text, at)
                return
            yield found
            at = found.end()


@functools.lru_cache(maxsize=256)
def text_search(pattern: str, flags: int = 0) -> TextSearch:
    """``pattern`` (which compiles) ready to search long texts (:class:`TextSearch`)."""
    compiled = re.compile(pattern, flags)
    atom = _leading_repeat_atom(_sre.parse(pattern, flags))
    if atom is None:
        return TextSearch(compiled, None)
    cut = _GLOBAL_FLAGS.match(pattern)
    head = cut.end() if cut else 0
    try:
        run_start = re.compile(f"{pattern[:head]}(?<!{atom}){pattern[head:]}", flags)
    except re.error:  # a global flag after a comment or a verbose blank ((?x) (?i)\w+@): finditer reads it
        return TextSearch(compiled, None)
    return TextSearch(compiled, run_start)


def _leading_repeat_atom(parsed: Any) -> str | None:
    """The source of the one-character class an unbounded repeat that opens ``parsed`` repeats
    (within groups that set no flags), or None (also when the pattern refers back to a group)."""
    if _refers_back(parsed):
        return None
    items = list(parsed)
    while items:
        op, value = items[0]
        if op == _sre_c.SUBPATTERN and not value[1] and not value[2]:
            items = list(value[-1])
            continue
        if op not in _REPEATS or value[1] != _sre_c.MAXREPEAT or len(value[2]) != 1:
            return None
        ((kind, arg),) = list(value[2])
        source = _atom_source(kind, arg)
        if source is None or list(_sre.parse(source, parsed.state.flags)) != [(kind, arg)]:
            return None  # rendered otherwise than parsed: not used
        return source
    return None


def _refers_back(parsed: Any) -> bool:
    """Whether a backreference (``\\1``, ``(?P=name)``, ``(?(1)...)``) stands anywhere in ``parsed``."""
    stack: list[Any] = [parsed]
    while stack:
        node = stack.pop()
        if isinstance(node, _sre.SubPattern):
            for op, value in node:
                if op in (_sre_c.GROUPREF, _sre_c.GROUPREF_EXISTS):
                    return True
                stack.append(value)
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
    return False


def _atom_source(kind: Any, arg: Any) -> str | None:
    """A one-character matcher written back as a pattern, or None when it is of another kind."""
    if kind == _sre_c.LITERAL:
        return re.escape(chr(arg))
    if kind == _sre_c.NOT_LITERAL:
        return f"[^{re.escape(chr(arg))}]"
    if kind == _sre_c.ANY:
        return "."
    if kind != _sre_c.IN:
        return None
    parts = []
    for item_kind, item_arg in arg:
        if item_kind == _sre_c.NEGATE:
            parts.append("^")
        elif item_kind == _sre_c.LITERAL:
            parts.append(re.escape(chr(item_arg)))
        elif item_kind == _sre_c.RANGE:
            parts.append(f"{re.escape(chr(item_arg[0]))}-{re.escape(chr(item_arg[1]))}")
        elif item_kind == _sre_c.CATEGORY and str(item_arg) in _CATEGORY_SOURCES:
            parts.append(_CATEGORY_SOURCES[str(item_arg)])
        else:
            return None
    return f"[{''.join(parts)}]"
