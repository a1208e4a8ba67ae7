"""A cheap lower bound on tokens: what a fit reads for a text it may drop without tokenizing it.

For the encodings with proven hard boundaries (o200k_base, cl100k_base: see ``tokens.encoding``)
BPE merges never cross pre-tokens, and the split patterns' pre-tokens hold at most one run of
non-whitespace characters: letter runs with at most one leading character, digit runs, an
optional space and a punctuation run, and whitespace-only runs. The one exception is o200k's
punctuation pre-token, which may go on with newlines and "/": in ``-\\n/`` the "/" run shares the
pre-token of the "-" run, so each "\\n/" or "\\r/" may merge one run into the one before.

So, of a text placed at ``[a, b)`` of a longer text, the tokens that start in ``[a, b)`` number at
least the runs that start in ``(a, b)`` less those merges: the pre-token holding a run's first
character starts at most one character before it (the optional leading space or character),
hence at or after ``a``, and distinct pre-tokens hold distinct tokens. A run that starts at ``a``
itself is not counted (its pre-token may start before ``a``).

Runs are counted with ``str.split``, which splits at ``str.isspace`` characters. Every one of
them is whitespace to the tokenizers' ``\\s`` except U+001C-U+001F; a text holding one of those is
given the bound 0. ASCII text takes a cheaper bound (substring counts). On the 134 documents of
the bundled example (92,000 tokens) the bound is about 0.7 of the count and costs about a
hundredth of tokenizing them.
"""

from __future__ import annotations

import re

__all__ = ["SHORT_TEXT", "at_least_ceiling", "tokens_at_least"]

# Shorter texts (a role, a marker, a line's prefix) are given 0: bounding them would cost more
# than it could ever spare.
SHORT_TEXT = 32
_NOT_SPLIT_BY_REGEX = re.compile("[\x1c-\x1f]")
_RARE_BLANKS = ("\t", "\r", "\x0b", "\x0c")


def tokens_at_least(text: str) -> int:
    """A lower bound on the tokens that start inside ``text`` wherever it is placed in a longer
    text, for an encoding with proven hard boundaries (0 for a short text)."""
    if len(text) < SHORT_TEXT:
        return 0
    if text.isascii():
        # A bound on its hard boundaries before a space (a token starts at each): each run of
        # ``k`` spaces adds ``k - 2 * (k // 2)``, at most 1, and one less when a blank comes
        # before it (or it starts the text), so no run adds more than its one boundary. A few
        # substring counts on the text itself (blanks other than newlines are rare: looked for
        # first), about 0.5 us for a 100-character message, against 1.4 us when its bytes were
        # encoded and counted; written here, not in a function of its own (a call a message).
        odd = text.count(" ") - 2 * text.count("  ")
        after_blank = text.count("\n ")
        if "\t" in text or "\r" in text or "\x0b" in text or "\x0c" in text:
            after_blank += sum(text.count(blank + " ") for blank in _RARE_BLANKS)
        return max(0, odd - after_blank - (text[0] == " "))
    if _NOT_SPLIT_BY_REGEX.search(text):
        return 0
    runs = len(text.split())
    if not text[0].isspace():
        runs -= 1
    return max(0, runs - text.count("\n/") - text.count("\r/"))


def at_least_ceiling(text: str) -> int | None:
    """A number :func:`tokens_at_least` never exceeds for ``text``, read in a third of its time
    (ASCII: its spaces, one of the bound's three substring counts; 1.0-1.5 ms on a 522 kB
    document); None where there is none cheaper than the bound itself (text beyond ASCII)."""
    if len(text) < SHORT_TEXT:
        return 0
    return text.count(" ") if text.isascii() else None
