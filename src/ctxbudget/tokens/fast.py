"""quicktok: an optional, faster engine for the bundled encodings (the ``fast`` extra).

quicktok (C++) encodes ``o200k_base`` and ``cl100k_base`` to tiktoken's token ids, faster on
this machine kind: a 100,000-token document in 5.2 ms against tiktoken's 18.1 ms, the bundled
legal request's 84,005 tokens in 2.5 against 17.1 ms, 2,000 short chat lines in 0.8 against
2.0 ms. Its load is the price: 0.6-0.8 s and about 78 MB for ``o200k_base`` (0.14-0.3 s and
39 MB for ``cl100k_base``), with the GIL held throughout, where tiktoken's takes about 0.15 s.
So it is never loaded by itself: a long-running process asks for it at start-up (``ctxbudget
serve --fast-tokenizer``, ``GatewayConfig.fast_tokenizer``); a one-shot CLI call, or a worker
that must answer within a second of its start, keeps tiktoken.

The ids must be tiktoken's, or every count is wrong. Before an engine is attached its vocabulary
is checked token by token, in rank order, against the bundled one (itself checked against
tiktoken's pinned sha256), and its pre-tokenizer against tiktoken's on probe texts (the pattern's
edges: contractions, case changes, digit runs, newlines, CJK, marks, letters of recent Unicode
versions). Measured before adopting it, over all 1,112,064 code points in 16 contexts each: the
two differ on 4,699 (o200k_base) and 4,657 (cl100k_base), every one a character added in Unicode
17.0 (Tolong Siki, CJK Extension J, ...), which quicktok reads as a letter and tiktoken, on
older tables, as unassigned. So a text holding a character this interpreter's ``unicodedata``
calls unassigned (Python 3.11 knows Unicode 14.0; every difference is among them), or a lone
surrogate (which quicktok refuses and tiktoken reads as U+FFFD), is encoded by tiktoken. Letters
of each recent Unicode version are probed where the two split differently: on a Python whose
tables know Unicode 17.0 (and so would send those letters to quicktok) the engine is refused
while tiktoken reads them otherwise. No other difference over 400,000 random texts of a tricky
alphabet; the test suite compares the two on every run.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from ..errors import ConfigError
from .bundled import bundled_tokens
from .encoding import TiktokenEncoding, length_table
from .registry import get_encoding

__all__ = ["FAST_ENCODINGS", "FastEngine", "check_engine", "use_fast_tokenizer", "use_fast_tokenizers"]

FAST_ENCODINGS = ("o200k_base", "cl100k_base")

# Texts whose pre-tokens sit at the split patterns' edges; each must encode to tiktoken's ids.
_PROBES = (
    "Hello, world! It's John's; they'RE here, we'll see—I'd've 'S 'T",
    "camelCaseWords HTTPServer XMLHttpRequest iPhone ÉCOLE élève naïve Straße",
    "12345678901 3.14159 1,000,000 ١٢٣ १२३ ½ Ⅻ ²³",
    "line one\nline two\r\n\r\n  indented\t\ttabs   \n\n\n/path/to/file.txt //comment",
    "日本語のテキスト。中文句子，还有标点！한국어 문장입니다. ภาษาไทย العربية עברית",
    "e\u0301 a\u0308\u0323 क्षि 😀👍🏽👨‍👩‍👧 \u200b\u00a0\u3000\u2028\u0085 \ufeff",
    '<|endoftext|> <|fim_prefix|> {"key": [1, 2.5e-3, null]} a-b_c.d@e.f #x $y %z ^&*()',
)
# Letters of recent Unicode versions (15.0: Kawi, CJK Extension H; 15.1: CJK Extension I; 16.0:
# Ol Onal, Garay; 17.0: Arabic Extended-B's U+088F, Tolong Siki, CJK Extension J), each in the
# contexts where an engine that reads it as a letter splits otherwise than one that does not
# (before punctuation, an apostrophe). This Python sends them to tiktoken when its tables do
# not know them; one whose tables do (3.15 should know 17.0) sends them to quicktok, and they
# must then give tiktoken's ids (tiktoken 0.14 reads 17.0's letters as unassigned: refused).
_RECENT_LETTERS = (
    "\U00011f04",
    "\U00031350",
    "\U0002ebf0",
    "\U0001e5d0",
    "\U00010d4a",
    "\u088f",
    "\U00011db3",
    "\U000323b0",
)
_LOCK = threading.Lock()


class _Tables(Protocol):
    """What reading a character's class needs of :mod:`unicodedata` (a test gives newer tables)."""

    def category(self, character: str, /) -> str: ...

    def __hash__(self) -> int: ...


def use_fast_tokenizer(name: str, *, enabled: bool = True) -> bool:
    """Encode the bundled encoding ``name`` with quicktok from now on, in this process (the
    same token ids, faster); ``enabled=False`` goes back to tiktoken (quicktok keeps what it
    loaded: enabling again takes about 0.04 s). False when quicktok is not installed (tiktoken
    stays). Raises :class:`ConfigError` for an encoding quicktok does not cover (also one
    registered again under a bundled name), or a quicktok whose vocabulary or splits differ
    from tiktoken's: an engine that would miscount is never used."""
    _check_name(name)
    if not isinstance(enabled, bool):
        raise ConfigError(f"enabled must be True or False, got {enabled!r:.60}")
    encoding = get_encoding(name)
    with _LOCK:  # one load and check at a time; an enable and a disable never interleave
        if not enabled:
            if isinstance(encoding, TiktokenEncoding):
                encoding.attach_fast(None)
            return False  # one registered again was never given one
        if not isinstance(encoding, TiktokenEncoding) or not encoding.bundled:
            raise ConfigError(
                f"encoding {name!r} is not the bundled one (registered again): no fast tokenizer for it"
            )
        if encoding.engine == "quicktok":
            return True
        try:
            import quicktok
        except ImportError:
            return False
        try:
            engine = quicktok.get_encoding(name)
        except (RuntimeError, OSError) as exc:  # its data files missing or damaged
            raise ConfigError(f"quicktok cannot load {name}: {exc}; reinstall quicktok-v1") from exc
        encoding.attach_fast(check_engine(name, engine, encoding))
        return True


def use_fast_tokenizers(names: Iterable[str] = FAST_ENCODINGS, *, required: bool = False) -> tuple[str, ...]:
    """:func:`use_fast_tokenizer` for each of ``names`` that is still the bundled encoding (one
    registered again keeps its own tokenizer: a plug-in, beside which a gateway still starts);
    those now encoded by quicktok. Every name is checked before any is attached. With
    ``required``, quicktok not installed is a :class:`ConfigError` (a server told to use it)."""
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise ConfigError(f"use_fast_tokenizers takes a list of encoding names, got {names!r:.60}")
    names = tuple(dict.fromkeys(names))
    for name in names:
        _check_name(name)
    bundled = tuple(name for name in names if _is_bundled(get_encoding(name)))
    used = tuple(name for name in bundled if use_fast_tokenizer(name))
    if required and used != bundled:
        raise ConfigError("the fast tokenizer needs quicktok: pip install 'ctxbudget[fast]'")
    return used


def _check_name(name: object) -> None:
    if not isinstance(name, str) or name not in FAST_ENCODINGS:
        raise ConfigError(f"no fast tokenizer for {name!r:.60}; it covers {', '.join(FAST_ENCODINGS)}")


def _is_bundled(encoding: object) -> bool:
    return isinstance(encoding, TiktokenEncoding) and encoding.bundled


class FastEngine:
    """quicktok's encoder, for the texts it encodes as tiktoken does (see the module docstring):
    what :meth:`TiktokenEncoding.attach_fast` takes."""

    def __init__(self, engine: Any, byte_lengths: Sequence[int], tables: _Tables = unicodedata) -> None:
        import numpy  # quicktok's own dependency

        self._engine = engine
        self._table = numpy.frombuffer(length_table("quicktok", byte_lengths), dtype=numpy.uint8)
        self._unsure_bmp = _unsure_bmp(tables)
        self._unsure_astral = _unsure_astral(tables)

    def encode(self, text: str) -> list[int] | None:
        """The token ids of ``text``, or None: tiktoken encodes it (a character these Unicode
        tables call unassigned, a lone surrogate, or a text quicktok fails on). ASCII text is
        taken at once; other text is checked by one scan of its BMP characters (2.2 ms over
        380,000 CJK characters) and a look at each distinct one beyond."""
        if not self._takes(text):
            return None
        try:
            return self._engine.encode_ordinary(text)  # type: ignore[no-any-return]
        except (TypeError, ValueError, RuntimeError):
            return None

    def lengths(self, text: str) -> bytes | None:
        """Each token's byte length, one byte a token, or None (as :meth:`encode`). The ids come
        as one array and are looked up in C: no list of ints (a 100,000-token document 5.4 ms
        against 11.0 ms for the ids as a list looked up with ``itemgetter``)."""
        if not self._takes(text):
            return None
        try:
            ids, _ = self._engine.encode_batch([text], 1)
        except (TypeError, ValueError, RuntimeError):
            return None
        return bytes(self._table[ids].tobytes())

    def lengths_each(self, texts: Sequence[str]) -> list[bytes | None]:
        """:meth:`lengths` of each text, the texts taken encoded in one call (the legal example's
        125 texts: 1.4 ms, against about 3 ms as 125 calls), whose encode releases the GIL: another
        thread runs meanwhile (:func:`ctxbudget.tokens.counter.count_ahead`). The routing checks
        before it and the table's lookup after it hold the GIL."""
        found: list[bytes | None] = [None] * len(texts)
        taken = [i for i, text in enumerate(texts) if self._takes(text)]
        if not taken:
            return found
        try:
            ids, offsets = self._engine.encode_batch([texts[i] for i in taken], 1)
        except (TypeError, ValueError, RuntimeError):
            return found
        lengths = bytes(self._table[ids].tobytes())
        bounds = offsets.tolist()
        for k, i in enumerate(taken):
            found[i] = lengths[bounds[k] : bounds[k + 1]]
        return found

    def _takes(self, text: str) -> bool:
        if not isinstance(text, str):  # tiktoken's TypeError (quicktok reads bytes as UTF-8)
            return False
        if str.isascii(text):
            return True
        if self._unsure_bmp.search(text):
            return False
        first = _ASTRAL.search(text)  # then the astral characters, from the first one on
        return first is None or self._unsure_astral.search(text, first.start()) is None


def _runs(tables: _Tables, start: int, stop: int, categories: str) -> list[tuple[int, int]]:
    """The runs of code points in ``[start, stop)`` whose categories (by ``tables``) the regex
    ``categories`` matches, one two-letter category a code point, as (first, last) pairs. The
    categories are read as one text of two letters a code point (a match never straddles two: a
    category's second letter is lower case), so the runs are found in C."""
    read = "".join(map(tables.category, map(chr, range(start, stop))))
    return [(start + m.start() // 2, start + m.end() // 2 - 1) for m in re.finditer(categories, read)]


def _class(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


@functools.cache
def _unsure_bmp(tables: _Tables) -> re.Pattern[str]:
    """The BMP characters ``tables`` call unassigned, and the surrogates (12 ms, once: a class of
    the BMP compiles to a bitmap; one with the astral ranges too took 212 ms to scan)."""
    return re.compile(f"[{_class(_runs(tables, 0x80, 0x10000, '(?:C[ns])+'))}]")


_ASTRAL = re.compile("[\\U00010000-\\U0010ffff]")


# The planes whose characters the tables are read for; planes 4-13 hold none through Unicode
# 17.0 (one there sends its text to tiktoken: the same ids), and 15-16 are private use but for
# their last two code points, noncharacters (both for good: Unicode's stability policy).
_ASSIGNED_PLANES = ((0x10000, 0x40000), (0xE0000, 0xF0000))
_PRIVATE_USE_PLANES = ((0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))


@functools.cache
def _unsure_astral(tables: _Tables) -> re.Pattern[str]:
    """An astral character outside the ranges ``tables`` call assigned: a negated class of those
    ranges, the largest first (a character is tried against them in order; an emoji stops at its
    block), behind a look-ahead that passes over the BMP at once. 10 ms over 200,000 characters
    of emoji, nothing held; listing each astral character took 15 ms and 65 bytes a character
    (177 MB over 2.75 million). Built in about 40 ms."""
    ranges = list(_PRIVATE_USE_PLANES)
    for start, stop in _ASSIGNED_PLANES:
        ranges += _runs(tables, start, stop, "(?:(?!Cn)[A-Z][a-z])+")
    ranges.sort(key=lambda span: span[0] - span[1])
    return re.compile(f"(?=[\U00010000-\U0010ffff])[^\x00-\uffff{_class(ranges)}]")


def check_engine(
    name: str, engine: Any, encoding: TiktokenEncoding, tables: _Tables = unicodedata
) -> FastEngine:
    """``engine`` ready to attach, or :class:`ConfigError` unless it holds the bundled vocabulary
    of ``name`` in rank order (and ``encoding`` does) and splits every probe text it is given as
    tiktoken does (those ``tables`` send to it: the recent letters only where they know them)."""
    tokens = bundled_tokens(name)
    lengths = encoding.byte_lengths
    if list(lengths) != list(map(len, tokens)):
        raise ConfigError(f"encoding {name!r} does not hold the bundled vocabulary: no fast tokenizer for it")
    try:
        theirs = list(map(engine.decode_single_token_bytes, range(len(tokens))))
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"quicktok's {name} vocabulary is smaller than the bundled one ({exc})") from exc
    if theirs != list(tokens):
        rank = next(i for i, (a, b) in enumerate(zip(theirs, tokens, strict=True)) if a != b)
        raise ConfigError(
            f"quicktok's {name} vocabulary differs from the bundled one at rank {rank:,} "
            f"({theirs[rank]!r} against {tokens[rank]!r}): not used, reinstall a matching quicktok-v1"
        )
    fast, reference = FastEngine(engine, lengths, tables), encoding.tiktoken
    probes = [*_PROBES, *(f"{c}.a {c}'s x{c}. {c}{c}" for c in _RECENT_LETTERS)]
    for probe in probes:
        ids, sizes, expected = fast.encode(probe), fast.lengths(probe), reference.encode_ordinary(probe)
        if (ids is not None and list(ids) != expected) or (
            sizes is not None and sizes != bytes(lengths[i] for i in expected)
        ):
            raise ConfigError(
                f"quicktok splits {probe[:40]!r} differently from tiktoken ({name}): not used "
                "(a quicktok-v1 or an interpreter whose Unicode tables are newer than tiktoken's)"
            )
    return fast
