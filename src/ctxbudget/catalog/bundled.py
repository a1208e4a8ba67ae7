"""Reading the bundled catalog document without parsing the models a process never reads.

``json.loads`` of the bundled ``models.json`` (about 800 kB, 1,500 models) took 6-7 ms of each
process's first fit or count, most of it allocating the prices and sources of models the process
never looks up. The resolution rules need only each entry's id, provider, aliases and match rule,
which ``scripts/gen_catalog.py`` writes first on the entry's own line; :func:`read_document`
reads those off the front of each line and parses the rest of an entry when its model is first
built (about 2.5 ms for the document against 5-7 ms for ``json.loads``, in fresh processes).

A text not in that layout (no block of one entry a line at its end, or an entry that does not
start with its id and provider) is parsed whole. Within the layout the reader trusts the
generator's order: an entry's aliases and match rule, when it has them, follow its provider
directly (a hand edit that moved them later would hide them from resolution), and the test suite
checks that the shipped file reads as ``json.loads`` reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, overload

__all__ = ["EntryHead", "LazyEntries", "entry_heads", "read_document"]

_MODELS = ',\n "models": [\n'  # the models last, one entry a line (gen_catalog.dump)
_END = "\n ]\n}\n"
_DECODER = json.JSONDecoder()


class EntryHead(NamedTuple):
    """What resolution reads of a model entry."""

    id: str
    provider: str
    aliases: Sequence[str] | None
    match: Mapping[str, Any] | None


class LazyEntries(Sequence[Mapping[str, Any]]):
    """Model entries of one document, each parsed from its line when it is first read."""

    def __init__(self, text: str, starts: Sequence[int], heads: Sequence[EntryHead]) -> None:
        self._text = text
        self._starts = starts
        self.heads = heads
        self._parsed: list[Mapping[str, Any] | None] = [None] * len(starts)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        entry = self._parsed[index]
        if entry is None:  # two threads may both parse it: the entries are equal values
            entry = self._parsed[index] = _DECODER.raw_decode(self._text, self._starts[index])[0]
        return entry

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return (self[i] for i in range(len(self)))


def entry_heads(entries: Sequence[Mapping[str, Any]]) -> Sequence[EntryHead]:
    """Each entry's id, provider, aliases and match rule (read off the lines when lazy)."""
    if isinstance(entries, LazyEntries):
        return entries.heads
    return [EntryHead(e["id"], e["provider"], e.get("aliases"), e.get("match")) for e in entries]


class _Layout(Exception):
    """The document is not in the generated layout (it is then parsed whole)."""


def read_document(text: str) -> dict[str, Any]:
    """The catalog document ``text`` holds, its ``models`` a :class:`LazyEntries` when the text is
    in the generated layout, else parsed whole (``json.loads``'s errors for a broken text)."""
    cut = text.find(_MODELS)
    if cut < 0 or not text.endswith(_END):
        return dict(json.loads(text))
    try:
        head = json.loads(text[:cut] + "\n}")
        models = _entries(text, cut + len(_MODELS), len(text) - len(_END))
    except (ValueError, _Layout):
        return dict(json.loads(text))
    if not isinstance(head, dict) or "models" in head:
        return dict(json.loads(text))
    return {**head, "models": models}


def _entries(text: str, start: int, stop: int) -> LazyEntries:
    """The entries on the lines from ``start`` (just after a newline) to ``stop``: each line an
    entry (JSON text holds no raw newline inside a value), each but the last ending with a comma.

    One regular-expression pass finds every line's head (about 1 ms for the bundled file; reading
    them with ``JSONDecoder.raw_decode`` a value at a time took 3 ms): an id or provider with an
    escape in it, or a line that does not start with them, leaves a line unmatched, and then the
    document is parsed whole."""
    starts: list[int] = []
    heads: list[EntryHead] = []
    for found in _HEAD.finditer(text, start - 1, stop):
        model_id, provider, aliases, match = found.groups()
        if starts and text[found.start() - 1] != ",":
            raise _Layout
        starts.append(found.start() + 1)
        heads.append(
            EntryHead(
                model_id,
                provider,
                None if aliases is None else _aliases(aliases),
                None if match is None else _DECODER.raw_decode(text, found.end())[0],
            )
        )
    if len(starts) != text.count("\n", start - 1, stop):
        raise _Layout
    return LazyEntries(text, starts, heads)


# A line's head: id and provider without escapes, aliases (strings without escapes), then
# whether a match rule follows (its value is parsed as JSON from the end of the match). Aliases
# or a match rule it cannot read so (an escape in an alias, a rule that is not an object) leave
# the line unmatched, not read as none.
_HEAD = re.compile(
    r'\n\{"id":"([^"\\\n]*)","provider":"([^"\\\n]*)"'
    r'(?:,"aliases":\[((?:"[^"\\\n]*"(?:,"[^"\\\n]*")*)?)\])?(,"match":(?=\{))?'
    r'(?!,"(?:aliases|match)":)'
)


def _aliases(listed: str) -> list[str]:
    """``"a","b"`` as ``["a", "b"]`` (the strings hold no quote or backslash)."""
    return listed[1:-1].split('","') if listed else []
