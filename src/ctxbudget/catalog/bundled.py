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

The bundled file also has an index beside it, ``models.index.json`` (written by
``scripts/index_catalog.py``, which ``make catalog`` runs): the document's other keys, the entries'
ids and providers (each a text of one a line), the byte offset of each entry's line, and the
aliases and match rules of those that have them as one JSON text of its own, parsed when a
resolution first needs one (an id the catalog lists, the usual case, needs none). :func:`read_bundled`
reads that and an entry's line from ``models.json``'s bytes when its model is first built, instead
of decoding the 800 kB text and finding every line's head. A process's first fit of a two-word
body for ``gpt-5`` (fresh processes, 21 pairs): 3.8 ms, against 5.5 ms when the index held every
entry's head, its aliases and rule with it, as a JSON row (paired ratio 0.69; 2,000-message
history's first fit 0.92). An index that does not describe the file beside it (its length or
CRC-32 differs) is not used.
"""

from __future__ import annotations

import functools
import json
import re
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, overload

from ..errors import ConfigError

__all__ = [
    "EntryHead",
    "IndexedHeads",
    "LazyEntries",
    "entry_heads",
    "entry_keys",
    "index_of",
    "read_bundled",
    "read_document",
]

_MODELS = ',\n "models": [\n'  # the models last, one entry a line (gen_catalog.dump)
_END = "\n ]\n}\n"
_DECODER = json.JSONDecoder()
INDEX_FORMAT = 2  # models.index.json's layout (index_of)


class EntryHead(NamedTuple):
    """What resolution reads of a model entry."""

    id: str
    provider: str
    aliases: Sequence[str] | None
    match: Mapping[str, Any] | None


class LazyEntries(Sequence[Mapping[str, Any]]):
    """Model entries of one document, each parsed by ``read(position)`` when it is first read."""

    def __init__(self, read: Callable[[int], Mapping[str, Any]], heads: Sequence[EntryHead]) -> None:
        self._read = read
        self.heads = heads
        self._parsed: list[Mapping[str, Any] | None] = [None] * len(heads)

    def __len__(self) -> int:
        return len(self.heads)

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        entry = self._parsed[index]
        if entry is None:  # two threads may both parse it: the entries are equal values
            entry = self._parsed[index] = self._read(index)
        return entry

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return (self[i] for i in range(len(self)))


def entry_heads(entries: Sequence[Mapping[str, Any]]) -> Sequence[EntryHead]:
    """Each entry's id, provider, aliases and match rule (read off the lines when lazy)."""
    if isinstance(entries, LazyEntries):
        return entries.heads
    return [EntryHead(e["id"], e["provider"], e.get("aliases"), e.get("match")) for e in entries]


def entry_keys(entries: Sequence[Mapping[str, Any]]) -> Sequence[tuple[str, str]]:
    """Each entry's ``(provider, id)``, without reading its aliases and match rule when the
    entries were read by an index (:class:`IndexedHeads`)."""
    heads = entry_heads(entries)
    if isinstance(heads, IndexedHeads):
        return heads.keys
    return [(h.provider, h.id) for h in heads]


class IndexedHeads(Sequence[EntryHead]):
    """The heads an index lists: ids and providers read at once, aliases and match rules from
    their own JSON text when one is first asked for."""

    def __init__(self, ids: Sequence[str], providers: Sequence[str], rules: str, source: Path) -> None:
        self.keys = list(zip(providers, ids, strict=True))
        self._rules_text = rules
        self._source = source
        self._rules: dict[int, tuple[Sequence[str] | None, Mapping[str, Any] | None]] | None = None

    def _by_position(self) -> dict[int, tuple[Sequence[str] | None, Mapping[str, Any] | None]]:
        rules = self._rules
        if rules is None:  # two threads may both parse it: equal values
            rules = self._rules = _rules_of(self._rules_text, len(self.keys), self._source)
        return rules

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, index: int) -> EntryHead: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[EntryHead]: ...

    def __getitem__(self, index: int | slice) -> EntryHead | Sequence[EntryHead]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        provider, model_id = self.keys[index]
        aliases, match = self._by_position().get(index % len(self) if index < 0 else index, (None, None))
        return EntryHead(model_id, provider, aliases, match)


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
    for found in _head_pattern().finditer(text, start - 1, stop):
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
    return LazyEntries(lambda i: _DECODER.raw_decode(text, starts[i])[0], heads)


@functools.cache
def _head_pattern() -> re.Pattern[str]:
    """A line's head: id and provider without escapes, aliases (strings without escapes), then
    whether a match rule follows (its value is parsed as JSON from the end of the match). Aliases
    or a match rule it cannot read so (an escape in an alias, a rule that is not an object) leave
    the line unmatched, not read as none. Compiled on first use (0.4 ms): the bundled catalog is
    read by its index."""
    return re.compile(
        r'\n\{"id":"([^"\\\n]*)","provider":"([^"\\\n]*)"'
        r'(?:,"aliases":\[((?:"[^"\\\n]*"(?:,"[^"\\\n]*")*)?)\])?(,"match":(?=\{))?'
        r'(?!,"(?:aliases|match)":)'
    )


def _aliases(listed: str) -> list[str]:
    """``"a","b"`` as ``["a", "b"]`` (the strings hold no quote or backslash)."""
    return listed[1:-1].split('","') if listed else []


def index_of(data: bytes) -> dict[str, Any]:
    """The index of a catalog document in the generated layout (``data``, its UTF-8 bytes): the
    bytes' length and CRC-32, the document's other keys, the models' ids and providers (each a
    text, one a line), the byte offset of each model's line, and ``rules``: a JSON text of
    ``[position, aliases, match]`` for each model that has either. ``ValueError`` for a document
    not in that layout, or whose ids or providers hold a line break."""
    text = data.decode("utf-8")
    whole = json.loads(text)
    document = read_document(text)
    if not isinstance(document["models"], LazyEntries):
        raise ValueError("the document is not in the generated layout (one model a line, last)")
    start = data.index(_MODELS.encode()) + len(_MODELS)
    offsets = [start]
    for line in data[start : len(data) - len(_END)].split(b"\n")[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    rules = []
    for position, (entry, offset) in enumerate(zip(whole["models"], offsets, strict=True)):
        if _line_at(data, offset) != entry:
            raise ValueError(f"model {entry.get('id')!r} is not on its own line")
        if "\n" in entry["id"] + entry["provider"]:
            raise ValueError(
                f"model {entry['id']!r} of {entry['provider']!r}: a line break in its id or provider"
            )
        if entry.get("aliases") is not None or entry.get("match") is not None:
            rules.append([position, entry.get("aliases"), entry.get("match")])
    head = {k: v for k, v in whole.items() if k != "models"}
    return {
        "format": INDEX_FORMAT,
        "bytes": len(data),
        "crc32": zlib.crc32(data),
        "head": head,
        "ids": "\n".join(e["id"] for e in whole["models"]),
        "providers": "\n".join(e["provider"] for e in whole["models"]),
        "offsets": offsets[: len(whole["models"])],
        "rules": json.dumps(rules, ensure_ascii=False, separators=(",", ":")),
    }


def _line_at(data: bytes, offset: int) -> Any:
    """The JSON value on the line that starts at ``offset`` (its separating comma left out)."""
    end = data.find(b"\n", offset)
    return json.loads(data[offset : len(data) if end < 0 else end].rstrip(b","))


def read_bundled(models: Path, index: Path) -> dict[str, Any] | None:
    """The document of the file ``models`` by the index ``index`` describes it with (see the
    module docstring), its entries read from their lines when first used; None when the index is
    missing, broken, of another format, or of other bytes (their length or CRC-32: 0.1 ms), and
    then the text is read whole. The file's bytes are read here, once: a file replaced later (a
    package upgraded under a running gateway) does not change what this process reads."""
    try:
        found = json.loads(index.read_bytes())
        data = models.read_bytes()
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(found, dict) or found.get("format") != INDEX_FORMAT:
        return None
    if found.get("bytes") != len(data) or found.get("crc32") != zlib.crc32(data):
        return None
    head, ids, providers, offsets, rules = (
        found.get(k) for k in ("head", "ids", "providers", "offsets", "rules")
    )
    if not isinstance(head, dict) or "models" in head or not isinstance(offsets, list):
        return None
    if not (isinstance(ids, str) and isinstance(providers, str) and isinstance(rules, str)):
        return None
    ids, providers = ids.split("\n"), providers.split("\n")
    if not len(ids) == len(providers) == len(offsets) or not all(type(o) is int for o in offsets):
        return None
    heads = IndexedHeads(ids, providers, rules, index)
    return {**head, "models": LazyEntries(_LineReader(models, data, heads.keys, offsets), heads)}


def _rules_of(
    text: str, count: int, source: Path
) -> dict[int, tuple[Sequence[str] | None, Mapping[str, Any] | None]]:
    """The aliases and match rule of each position an index's ``rules`` text lists (see
    :func:`index_of`); a text not of that shape is an index written by hand."""
    try:
        rows = json.loads(text)
    except (ValueError, RecursionError):
        rows = None
    if isinstance(rows, list) and all(_rule_row(row, count) for row in rows):
        return {row[0]: (row[1], row[2]) for row in rows}
    raise ConfigError(
        f"the bundled catalog's index {source} holds aliases and match rules it cannot read: an "
        "index written by hand? (python scripts/index_catalog.py writes it again; a reinstall "
        "restores both)"
    )


def _rule_row(row: object, count: int) -> bool:
    """Whether ``row`` is ``[position, aliases or null, match or null]`` for one of ``count`` models."""
    if not isinstance(row, list) or len(row) != 3 or type(row[0]) is not int or not 0 <= row[0] < count:
        return False
    aliases, match = row[1], row[2]
    named = aliases is None or (isinstance(aliases, list) and all(isinstance(a, str) for a in aliases))
    return named and (match is None or isinstance(match, dict))


class _LineReader:
    """Reads the entry of a position from its line of the file's bytes (``read_bundled``)."""

    def __init__(
        self, path: Path, data: bytes, keys: Sequence[tuple[str, str]], offsets: Sequence[int]
    ) -> None:
        self._path = path
        self._data = data
        self._keys = keys  # (provider, id)
        self._offsets = offsets

    def __call__(self, position: int) -> Mapping[str, Any]:
        provider, model_id = self._keys[position]
        try:
            entry = _line_at(self._data, self._offsets[position])
        except (ValueError, RecursionError):
            entry = None
        if not isinstance(entry, dict) or (entry.get("provider"), entry.get("id")) != (provider, model_id):
            raise ConfigError(
                f"the bundled catalog {self._path} does not match its index at model {model_id!r}: "
                "an index written by hand? (python scripts/index_catalog.py writes it again; a "
                "reinstall restores both)"
            )
        return entry
