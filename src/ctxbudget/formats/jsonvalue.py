"""JSON values as the boundary accepts them: strict decoding and one walk over what was decoded.

Every body, from a file, stdin, the gateway or a library caller, is checked once, iteratively
(no recursion, so no depth crashes): nesting at most ``MAX_DEPTH`` levels, no NaN or infinite
number (the output would not be strict JSON), no string with a lone surrogate (it cannot be
encoded as UTF-8, so it can be neither counted nor sent), object keys that are strings. Errors are
:class:`InvalidRequestError` with the JSON path of the offending value.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import InvalidRequestError

orjson: ModuleType | None
try:  # the gateway extra's: a faster reader of the same values (see decode_json)
    import orjson
except ImportError:  # pragma: no cover - the default install reads with json alone
    orjson = None

__all__ = [
    "FAST_JSON_BYTES",
    "FAST_WRITE_BYTES",
    "FAST_WRITE_ITEMS",
    "MAX_DEPTH",
    "JsonShape",
    "RepeatedKey",
    "check_json_value",
    "compact_json",
    "decode_json",
    "encodes_as_utf8",
    "unique_keys",
]

MAX_DEPTH = 100
# The largest body orjson reads (see _read_fast): it reserves 13x a body's size, json 2x; under
# this the 3 ms it saves a megabyte is worth the 13 MB it may take at most.
FAST_JSON_BYTES = 1 << 20
# What orjson writes (compact_json): at most this many keys and array elements (a session's base
# holds 716; the check that the value is one orjson writes as json does walks them all, 0.1 us
# each, and a 2,000-message chat's walk took 0.75 ms of the 1.1 ms json writes it in), and at
# most what it may reserve as it writes, by its peaks under tracemalloc: 14-15 bytes a character
# of ASCII text (a gateway's 1,000,000-token body peaked at 74 MB written by orjson, 21 MB by
# json) and 166-260 an element (a 1 MB array of nulls: 34 MB).
FAST_WRITE_ITEMS = 1024
FAST_WRITE_BYTES = 8 << 20
# An object orjson may not write whole (a float in it, text beyond ASCII) with a string value of at
# least this many characters is written a key at a time (:func:`compact_json`): each part by the
# writer that may take it, the long string by orjson. A gateway's turn, its report's floats beside
# a 500 kB question, took 2.0 ms written by json whole, 0.1 ms so. Below it, json writes the
# whole faster than the parts are each looked at.
COMPOSED_CHARS = 1 << 16
_RESERVED_A_CHAR = 15
_RESERVED_AN_ELEMENT = 260


def _child_path(path: str, key: object) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


# The integers JSON text may hold here: at most 4,300 digits (Python's own limit for turning one
# into text, which every count, hash and body written would hit).
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10**MAX_INT_DIGITS
_INT_SAFE_BITS = 14284  # an integer of at most this many bits is below 10**4300


def _long_int(value: int) -> bool:
    """Whether ``value`` has more than :data:`MAX_INT_DIGITS` digits (found without writing it)."""
    return value.bit_length() > _INT_SAFE_BITS and abs(value) >= _INT_LIMIT


def json_kind(value: object) -> str:
    """What ``value`` is in JSON's words (``null``, ``an array``, ``a string``) when it is a JSON
    value, else its Python type: what a message that refuses it says it got."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, tuple):  # not what JSON decoding gives: a list is its array
        return "a tuple (give a list)"
    for kinds, name in ((list, "an array"), (str, "a string"), ((int, float), "a number")):
        if isinstance(value, kinds):
            return name
    return f"a {type(value).__name__}"


def json_shown(value: object) -> str:
    """A value as a message that refuses it shows it: a scalar as its JSON (cut to 40
    characters), else its kind (:func:`json_kind`)."""
    if isinstance(value, bool | int | float | str):
        return json.dumps(value)[:40]
    return json_kind(value)


def _check_scalar(value: object, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        # a number past a double's range (1e400 in a file) is read as infinity: said so
        past = "; a number past 1.8e308, such as 1e400, reads as one" if math.isinf(value) else ""
        raise InvalidRequestError(
            f"{value!r} is not a JSON number (NaN and Infinity are refused{past})", path
        )
    if isinstance(value, int) and not isinstance(value, bool) and _long_int(value):
        raise InvalidRequestError(f"a number with more than {MAX_INT_DIGITS:,} digits", path)
    if isinstance(value, str):
        if value.isascii():  # the common case, checked at memory speed
            return
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRequestError(
                f"a string with a lone surrogate at character {exc.start} cannot be encoded as UTF-8", path
            ) from None
    elif not (value is None or isinstance(value, (bool, int, float))):
        raise InvalidRequestError(f"{type(value).__name__} is not a JSON value", path)


@dataclass(frozen=True)
class JsonShape:
    """What one check saw of a value: ``plain`` when it is made only of dicts with str keys, lists,
    str, int, float, bool and None (exactly those types: what ``json.loads`` returns), no float of
    2**63 or more either way (it may be an integer a 64-bit reader took for a float), and the
    characters of its strings (keys included), and its objects' keys (0 when not plain)."""

    plain: bool
    chars: int
    keys: int = 0


def check_json_value(value: Any, root: str = "$") -> JsonShape:
    """Raise :class:`InvalidRequestError` unless ``value`` is a JSON value the boundary accepts;
    returns what the check saw of it.

    The common value (plain, see :class:`JsonShape`) is checked by :func:`_plain_chars` without
    building a path per value; anything else, or a value that fails, is walked again with paths
    (:func:`_check_with_paths`), so an error still names where it is. On a 2,000-message chat
    body that is 5 ms instead of 25 ms.
    """
    seen = _plain_chars(value)
    if seen is not None:
        return JsonShape(True, seen[0], seen[1])
    _check_with_paths(value, root)
    return JsonShape(False, 0)


_SCALARS = frozenset([int, bool, type(None)])
_HUGE = 2.0**63


def encodes_as_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogate: a JSON escape of half a pair, or a
    command line's bytes that were not UTF-8); ASCII is checked at memory speed."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain_chars(value: Any, *, for_orjson: bool = False) -> tuple[int, int, int] | None:
    """The characters of a plain, valid value's strings and its objects' keys, its keys, and its
    arrays' elements; or None when it is not plain or not valid (then :func:`_check_with_paths`
    decides, and names the place). ``for_orjson``: also None at the first float or the first text
    beyond ASCII, or past :data:`FAST_WRITE_ITEMS` keys and elements (:func:`compact_json`)."""
    chars = keys = elements = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        kind = type(current)
        if kind is dict:
            if depth >= MAX_DEPTH and current:
                return None
            keys += len(current)
            if for_orjson and keys + elements > FAST_WRITE_ITEMS:
                return None
            for key in current:
                if type(key) is not str or not (key.isascii() or (not for_orjson and encodes_as_utf8(key))):
                    return None  # an ASCII key: no call
                chars += len(key)
            children: Any = current.values()
        elif kind is list:
            if depth >= MAX_DEPTH and current:
                return None
            elements += len(current)
            if for_orjson and keys + elements > FAST_WRITE_ITEMS:
                return None
            children = current
        else:
            children = (current,)
            depth -= 1  # a scalar at the top is checked as a child of nothing
        for child in children:
            kind = type(child)
            if kind is str:
                if not child.isascii() and (for_orjson or not encodes_as_utf8(child)):  # ASCII: no call
                    return None
                chars += len(child)
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is float:
                if for_orjson or not -_HUGE < child < _HUGE:  # also NaN, which compares false
                    return None
            elif kind is int:
                if _long_int(child):
                    return None
            elif kind not in _SCALARS:
                return None
    return chars, keys, elements


def _check_with_paths(value: Any, root: str) -> None:
    """The full walk: raises :class:`InvalidRequestError` naming the JSON path of what is wrong."""
    stack: list[tuple[Any, str, int]] = [(value, root, 0)]
    while stack:
        current, path, depth = stack.pop()
        if isinstance(current, dict):
            children = list(current.items())
            for key, _ in children:
                if not isinstance(key, str):
                    raise InvalidRequestError(f"object keys are strings, got {type(key).__name__}", path)
                _check_scalar(key, path)
        elif isinstance(current, (list, tuple)):
            children = list(enumerate(current))
        else:
            _check_scalar(current, path)
            continue
        if depth >= MAX_DEPTH and children:
            shown = path if len(path) <= 60 else path[:60] + "..."
            raise InvalidRequestError(f"nested deeper than {MAX_DEPTH} levels", shown)
        # reversed: the stack pops the first child first, so the first bad value is the one named
        stack.extend((child, _child_path(path, key), depth + 1) for key, child in reversed(children))


# A backslash-u escape. re looks for it 2.7x faster than ``in`` (it scans for the backslash alone):
# 0.16 against 0.43 ms for a 500 kB body.
_U_ESCAPE = re.compile(r"\\u")


def _orjson_reserves(chars: int, keys: int, elements: int) -> int:
    """What orjson may reserve to write a plain value (see :data:`FAST_WRITE_BYTES`)."""
    return _RESERVED_A_CHAR * chars + _RESERVED_AN_ELEMENT * (keys + elements)


def compact_json(value: Any, *, sort_keys: bool = False) -> str:
    """``value`` as JSON with no spaces and its characters as they are (not escaped): one writer
    for any value, so one value is always the same text.

    orjson writes it when installed and the value is plain (:class:`JsonShape`), of ASCII text,
    without a float, of at most :data:`FAST_WRITE_ITEMS` keys and elements and of a size it
    reserves at most :data:`FAST_WRITE_BYTES` for: its text is then json's, character for
    character (the suite holds the two against each other: every ASCII character in keys and
    strings, integers to 64 bits, keys sorted), in 0.13 against 0.86 ms for a session's 337 kB
    base, the check included. Left to json: a float (orjson writes 1e-05 as 0.00001), an integer
    past 64 bits (orjson refuses it), text beyond ASCII (orjson keeps a UTF-8 copy in each such
    string it writes, for as long as the string lives), and a value of many small parts (a long
    chat), whose check would take about what orjson saves.

    Else JSON's escaping encoder is the faster (2.8 against 4.3 ms for a 500 kB chat body), and it
    writes the same text whenever what it wrote holds no ``\\u`` escape (only characters from U+007F
    up are written otherwise by the one and the other); when it does, the value is written again,
    unescaped.

    An object that orjson may not write whole but holds a long string is written a key at a time
    (:data:`COMPOSED_CHARS`)."""
    return _written(value, sort_keys, compose=True)


def _written(value: Any, sort_keys: bool, *, compose: bool) -> str:
    """:func:`compact_json`; ``compose``: an object may be written a key at a time (only the
    outermost: its parts are written whole, so nesting costs no Python frames)."""
    if orjson is not None:
        seen = _plain_chars(value, for_orjson=True)
        if seen is not None and _orjson_reserves(*seen) <= FAST_WRITE_BYTES:
            try:
                written: bytes = orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
                return written.decode("utf-8")
            except orjson.JSONEncodeError:  # an integer past 64 bits
                pass
        elif compose and seen is None and _composable(value):
            return _composed(value, sort_keys)
    text = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"))
    if _U_ESCAPE.search(text) is None:
        return text
    return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))


def _composable(value: Any) -> bool:
    """Whether ``value`` is an object of string keys holding a string of :data:`COMPOSED_CHARS` or
    more, written a key at a time (:func:`_composed`)."""
    return (
        type(value) is dict
        and any(type(v) is str and len(v) >= COMPOSED_CHARS for v in value.values())
        and all(type(k) is str for k in value)
    )


def _composed(value: dict[str, Any], sort_keys: bool) -> str:
    """``value`` written as json writes an object, ``{key:value,...}`` (keys sorted as json sorts
    them), each key and value whole (:func:`_written`): the same text, as json writes an object by
    writing its parts."""
    items = sorted(value.items()) if sort_keys else value.items()
    parts = (f"{_written(k, False, compose=False)}:{_written(v, sort_keys, compose=False)}" for k, v in items)
    return "{" + ",".join(parts) + "}"


_UNREAD = object()


def _read_fast(data: bytes, refuse_repeats: bool) -> Any:
    """``data`` read by orjson when it reads it as :func:`decode_json` does, else ``_UNREAD`` (the
    strict reader then decides, and names what is wrong): 1.2 against 2.7 ms for a 500 kB chat
    body (a 100,000-token document), for bodies up to :data:`FAST_JSON_BYTES` (it peaks at 13x a
    body's size, json at 2x). What orjson refuses the strict reader reads or refuses itself (NaN,
    Infinity, 1e400, a lone surrogate, invalid UTF-8, nesting past 1,024 levels; a byte-order mark
    it reads past); orjson reads an integer past 64 bits as a float: a value holding a float of 2**63 or more
    is read again.

    orjson keeps the last of a repeated key in silence. With ``refuse_repeats`` the value's keys
    are held against the text's key marks (:func:`_key_marks`): every key written makes one, so
    as many marks as keys read means none was given twice; more marks (a repeat, or a mark inside
    a string) and the strict reader decides."""
    assert orjson is not None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _UNREAD
    shape = check_json_value(value)
    if not shape.plain or (refuse_repeats and _key_marks(data) != shape.keys):
        return _UNREAD
    return value


# A quote followed by a colon (JSON whitespace between): the end of every key of a valid text; a
# string value is never followed by a colon, so other marks are inside strings (an escaped quote,
# or a string's opening quote before a colon it starts with).
_KEY_MARK = re.compile(rb'"[ \t\n\r]*:')
_ESCAPED_MARK = re.compile(rb'\\"[ \t\n\r]*:')
# An escaped backslash. re finds a rare pair 2.5x faster than ``in`` does (its scan starts at each
# backslash): 0.15 against 0.38 ms for a 500 kB body that holds none.
_ESCAPED_BACKSLASH = re.compile(rb"\\\\")


def _key_marks(data: bytes) -> int:
    """The key marks of a JSON text (:data:`_KEY_MARK`), at least as many as the keys it writes.
    Those of an escaped quote (``\\":``, in a tool call's JSON-encoded arguments: every agent
    body has some) are not counted when the text holds no escaped backslash: every ``\\"`` is then
    a quote inside a string, and a key's closing quote never follows a backslash. 0.2 ms for a
    500 kB chat body, 0.6 ms for a 2,000-message one; an agent body with such marks was read
    again by the strict reader, 3x orjson's time."""
    marks = len(_KEY_MARK.findall(data))
    if _ESCAPED_BACKSLASH.search(data) is None:
        marks -= len(_ESCAPED_MARK.findall(data))
    return marks


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (NaN and Infinity are refused)")


class RepeatedKey(ValueError):
    """An object that gives one key twice (``key``)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"the key {key!r} is given twice in one object (JSON keeps only the last)")


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different (``json.loads``'s ``object_pairs_hook``; JSON
    itself keeps the last of a repeated one): :class:`RepeatedKey` otherwise."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return out


def _wide_text_hint(data: bytes) -> str:
    """What the bytes look like when they are UTF-32 or UTF-16 (a byte-order mark, or NULs beside
    each ASCII character: three in UTF-32, one in UTF-16, as Windows tools write text): the way to
    convert them."""
    head = data[:4]
    zeros = bytes(b == 0 for b in head)  # 1 where the byte is NUL
    if head in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff") or zeros in (b"\0\1\1\1", b"\1\1\1\0"):
        return "; it looks like UTF-32: save it as UTF-8 (iconv -f UTF-32 -t UTF-8)"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or zeros in (b"\0\1\0\1", b"\1\0\1\0"):
        return "; it looks like UTF-16 (as Windows tools write): save it as UTF-8 (iconv -f UTF-16 -t UTF-8)"
    return ""


# Said of bytes that are not UTF-8 and hold no NUL (text of one byte a character): the commonest
# such text is a Western Windows code page's.
_ONE_BYTE_HINT = "; if it is Latin-1 or Windows-1252, save it as UTF-8 (iconv -f WINDOWS-1252 -t UTF-8)"


def decode_json(data: bytes, source: str, *, refuse_repeats: bool = False) -> Any:
    """Decode UTF-8 JSON bytes strictly; errors say where (byte offset, line and column). With
    ``refuse_repeats`` an object that gives a key twice is an error (a body whose ``messages``
    came twice lost the first list in silence: the CLI's files and the gateway's bodies refuse it);
    without, JSON's reading keeps the last."""
    if orjson is not None and len(data) <= FAST_JSON_BYTES:
        read = _read_fast(data, refuse_repeats)
        if read is not _UNREAD:
            return read
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(
            f"{source}: not UTF-8 text at byte {exc.start} ({exc.reason})"
            + (_wide_text_hint(data) or ("" if 0 in data[:4] else _ONE_BYTE_HINT)),
            "",
        ) from None
    marked = len(text)
    text = text.removeprefix("\ufeff")
    marked -= len(text)  # 1 after a byte-order mark, which is 3 bytes
    if not text.strip(" \t\n\r"):  # JSON's whitespace only: another blank is bad JSON, said so
        raise InvalidRequestError(f"{source}: is empty (no JSON value in it)", "")
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, object_pairs_hook=unique_keys if refuse_repeats else None
        )
    except json.JSONDecodeError as exc:
        offset = len(text[: exc.pos].encode("utf-8", "surrogatepass")) + 3 * marked
        raise InvalidRequestError(
            f"{source}: not valid JSON at line {exc.lineno} column {exc.colno} (byte {offset}): "
            + _decode_reason(exc.msg)
            + _wide_text_hint(data),
            "",
        ) from None
    except (ValueError, RecursionError) as exc:
        reason = str(exc) if isinstance(exc, ValueError) else f"nested deeper than {MAX_DEPTH} levels"
        if "integer string conversion" in reason:
            reason = "a number with more than 4,300 digits"
        path = (
            _located(text, RepeatedKey if isinstance(exc, RepeatedKey) else _Constant)
            if isinstance(exc, ValueError)
            else ""
        )
        raise InvalidRequestError(f"{source}: {path + ': ' if path else ''}{reason}", "") from None
    check_json_value(value)
    return value


# The reader's messages that end in "at" (it gives the place apart): said whole, with the cause.
_DECODE_REASONS = {
    "Invalid control character at": (
        "a control character inside a string (a raw tab or line break: write it as \\t or \\n)"
    ),
    "Unterminated string starting at": "a string that is not closed (its closing quote is missing)",
    "Invalid \\escape": "an invalid escape in a string (a backslash is written \\\\)",
    "Invalid \\uXXXX escape": "an invalid \\u escape in a string (four hexadecimal digits follow \\u)",
}


def _decode_reason(message: str) -> str:
    """The JSON reader's ``message`` as a whole sentence (see :data:`_DECODE_REASONS`)."""
    return _DECODE_REASONS.get(message, message)


class _Repeated(dict[str, Any]):
    """An object read with a key given twice (:func:`_located`)."""


class _Constant:
    """NaN, Infinity or -Infinity where the text gives one (:func:`_located`)."""


def _located(text: str, kind: type) -> str:
    """The JSON path of the first object that repeats a key (``kind`` :class:`RepeatedKey`) or the
    first NaN or Infinity (:class:`_Constant`) in ``text`` (read again, marking them instead of
    refusing), or "" when there is none. Only a refused text is read twice."""
    wanted = _Repeated if kind is RepeatedKey else _Constant

    def pairs(given: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(given)
        return _Repeated(out) if len(out) != len(given) else out

    try:
        value = json.loads(text, parse_constant=lambda _: _Constant(), object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return ""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        current, path = stack.pop()
        if isinstance(current, wanted):
            return path
        children = (
            current.items()
            if isinstance(current, dict)
            else enumerate(current)
            if isinstance(current, list)
            else ()
        )
        stack.extend((child, _child_path(path, key)) for key, child in reversed(list(children)))
    return ""
