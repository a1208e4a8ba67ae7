"""Session storage: a small interface, and the SQLite store behind it.

One file, WAL mode, numbered schema migrations, content stored once and referenced by its
sha256, and each turn (with the ledger entries it adds) committed in one transaction: a crash
mid-write loses no committed turn and leaves no half turn. Opening, checking and migrating the
file, and naming its failures, live in :mod:`._sqlite_file`. The server store for several gateway
replicas, :class:`~ctxbudget.session.postgres.PostgresStore`, implements the same
:class:`SessionStore` protocol; :func:`connect_store` picks one from a path or a URL.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import threading
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from ..errors import ConfigError, StoreError
from ..formats.jsonvalue import compact_json, encodes_as_utf8
from ._checkpoints import BackgroundCheckpoints
from ._sqlite_file import (
    DAMAGED_HINT,
    MIGRATIONS,
    Readers,
    StoreMode,
    mapped_errors,
    open_store,
    savepoint,
    transaction,
)
from .turns import Turn

__all__ = [
    "MIGRATIONS",
    "CalibrationUpdate",
    "SQLiteStore",
    "SessionMeta",
    "SessionStore",
    "StoreMode",
    "as_stored",
    "connect_store",
    "first_missing",
]

# Given a key's stored state (None: nothing stored yet), the state to store in its place.
CalibrationUpdate = Callable[[Mapping[str, Any] | None], Mapping[str, Any]]
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def _identity(path: str) -> tuple[int, int] | None:
    """The file at ``path`` as the system knows it (device, inode); None for an in-memory store,
    and a missing file never equals an open one."""
    if path == ":memory:":
        return None
    try:
        found = os.stat(path)
    except OSError:
        return (-1, -1)
    return (found.st_dev, found.st_ino)


# A session name as a client may give one (the gateway's header, the CLI's argument).
MAX_SESSION_CHARS = 200


# Characters that reorder how the text around them is displayed (embeddings, overrides, isolates,
# marks): "matter-\u202e24" prints as "matter-42" in a log, a terminal or `session list`.
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Unicode's default-ignorable code points (DerivedCoreProperties.txt): they print nothing
# ("matter-4\u200b2", a zero-width space, a soft hyphen, a byte-order mark, a filler, a variation
# selector: each prints as "matter-42"). Scripts and emoji need some of them where they stand
# (:func:`_needed`); anywhere else a name holding one is refused.
_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
# The ranges as one character class: a name is looked at in one scan, where each of its characters
# was tested against the 17 ranges (a 25-character name: 36 us, now 2; the gateway checks the
# session's name twice a request).
_IGNORABLE_CHARS = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _IGNORABLE) + "]")
# Unicode's control characters (category Cc, a set its stability policy fixes: U+0000-001F,
# U+007F-009F) and its line and paragraph separators (Zl, Zp).
_BREAKING_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_JOINERS = frozenset("\u200c\u200d")
_PRESENTATION = frozenset("\ufe0e\ufe0f")
_KEYCAP_BASES = frozenset("0123456789#*")
_TAGS = range(0xE0020, 0xE0080)
_BLACK_FLAG = "\U0001f3f4"


_ZWJ = "\u200d"
_EMOJI_MODIFIERS = range(0x1F3FB, 0x1F400)  # the five skin tones
_VIRAMA = 9  # the canonical combining class of a virama (Devanagari's, Bengali's, ...)
# A subdivision flag's tags (Unicode's emoji tag sequence): two letters of a region, one to three
# letters or digits of its subdivision, and the cancel tag, after the black flag (England's is
# gbeng). Any other run of tags prints as nothing (text hidden in a name: "matter-🏴" and "hi").
_FLAG_TAGS = re.compile(
    "[\U000e0061-\U000e007a]{2}[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,3}\U000e007f"
)


@functools.cache
def _property(name: str) -> Callable[[str], Any]:
    """A test of one character for a Unicode property ``re`` does not know (``regex``'s, loaded
    here: only a name that holds an ignorable character needs it)."""
    import regex

    return regex.compile(rf"\p{{{name}}}").fullmatch


def _is(prop: str, char: str) -> bool:
    """Whether ``char`` (one character, or none) has the Unicode property ``prop``."""
    return bool(char) and _property(prop)(char) is not None


def _joined_emoji(name: str, at: int) -> bool:
    """Whether the joiner ``name[at]`` stands in an emoji sequence: a pictograph before it (its
    presentation selector and skin tone aside: ❤\ufe0f\u200d🔥, 👩🏽\u200d💻) and one after it."""
    head = at - 1
    while head >= 0 and (name[head] == "\ufe0f" or ord(name[head]) in _EMOJI_MODIFIERS):
        head -= 1
    pictograph = "Extended_Pictographic"
    return head >= 0 and _is(pictograph, name[head]) and _is(pictograph, name[at + 1 : at + 2])


def _between_joining_letters(name: str, at: int) -> bool:
    """Whether the non-joiner ``name[at]`` stands where it keeps two letters of a joining script
    apart (a Persian word): a letter that joins on its left before it, one that joins on its
    right after it, marks that join through (transparent) aside (IDNA's rule, RFC 5892 A.1)."""
    head, tail = at - 1, at + 1
    while head >= 0 and _is("jt=T", name[head]):
        head -= 1
    while tail < len(name) and _is("jt=T", name[tail]):
        tail += 1
    before, after = name[head : head + 1] if head >= 0 else "", name[tail : tail + 1]
    return (_is("jt=L", before) or _is("jt=D", before)) and (_is("jt=R", after) or _is("jt=D", after))


def _flag_tag(name: str, at: int) -> bool:
    """Whether the tag ``name[at]`` is one of a subdivision flag's (:data:`_FLAG_TAGS`)."""
    head = tail = at
    while head > 0 and ord(name[head - 1]) in _TAGS:
        head -= 1
    while tail < len(name) and ord(name[tail]) in _TAGS:
        tail += 1
    return name[head - 1 : head] == _BLACK_FLAG and _FLAG_TAGS.fullmatch(name, head, tail) is not None


def _needed(name: str, at: int) -> bool:
    """Whether the ignorable ``name[at]`` is one a script or an emoji needs there, so that it
    changes what prints: a joiner after a virama (a Devanagari conjunct), a joiner inside an
    emoji sequence (a family, ❤\ufe0f\u200d🔥), a non-joiner between two letters of a joining
    script (a Persian word), a presentation selector after an emoji or in a keycap
    (1\ufe0f\u20e3), a tag in a subdivision flag. Anywhere else it prints as nothing (a joiner
    between two Chinese characters, a selector after a letter, a run of tags after a flag)."""
    char, before = name[at], name[at - 1 : at]
    if char in _JOINERS:
        if before and unicodedata.combining(before) == _VIRAMA:
            return True
        return _joined_emoji(name, at) if char == _ZWJ else _between_joining_letters(name, at)
    if char in _PRESENTATION:
        if before.isascii():  # a keycap's digit, # or * (1\ufe0f alone prints as 1)
            return before in _KEYCAP_BASES and name[at + 1 : at + 2] == "\u20e3"
        return _is("Emoji", before)
    return ord(char) in _TAGS and _flag_tag(name, at)


def name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a session's name (None: nothing). Names are taken as
    given, never cut or altered, so two different names never become one session: a blank one,
    one over :data:`MAX_SESSION_CHARS`, one with a control character or a line break (a tab,
    a newline, U+2028: ``session list`` prints one name a line), one with a bidirectional
    control or an invisible character (it prints as another name) and one that begins or ends
    with a blank (it prints as the name without it, and an HTTP header's value loses it, so the
    gateway could never name the session) are refused."""
    if not name.strip():
        return "is empty or blank"
    if name != name.strip():
        return "begins or ends with a blank: it prints as the name without it, and a header's value loses it"
    if len(name) > MAX_SESSION_CHARS:
        return f"is {len(name):,} characters long; at most {MAX_SESSION_CHARS} are accepted"
    if _BREAKING_CHARS.search(name):
        return "holds a control character or a line break"
    if not _BIDI_CONTROLS.isdisjoint(name):
        return "holds a bidirectional control character (U+202E and its kind): it would print as another name"
    if any(not _needed(name, found.start()) for found in _IGNORABLE_CHARS.finditer(name)):
        return "holds an invisible character (a zero-width space, a soft hyphen, ...): it would print as another name"
    if not unicodedata.is_normalized("NFC", name):
        return "is not in Unicode's composed form (NFC): 'cafe' and a combining accent print as 'café'"
    if not encodes_as_utf8(name):  # a lone surrogate: bytes that were not UTF-8 (a shell argument)
        return "is not valid UTF-8 text"
    return None


@dataclass(frozen=True, kw_only=True)
class SessionMeta:
    """A session's name, policy, model, and the stable items every turn starts from. A session
    the gateway recorded has the policy :data:`GATEWAY_RECORDED`: its turns are the chat bodies
    the gateway fitted or assembled, not turns of a policy that a ``Session`` can go on with."""

    name: str
    policy: str
    model: str
    base: Mapping[str, Any]

    @property
    def recorded_by_gateway(self) -> bool:
        """Whether the gateway recorded the session (it is read, not continued, by ``Session``)."""
        return self.policy == GATEWAY_RECORDED


GATEWAY_RECORDED = "gateway"


class SessionStore(Protocol):
    """What sessions need from storage."""

    def create(self, meta: SessionMeta) -> SessionMeta:
        """Create a session; a second one with the same name is an error. Returns the metadata as
        stored, what :meth:`meta` reads back (its base a copy of the one given, read from the
        stored text: a caller that changes its base later changes nothing stored)."""
        ...

    def meta(self, name: str) -> SessionMeta:
        """A session's metadata; unknown names raise ConfigError listing the known ones."""
        ...

    def policy_of(self, name: str) -> str | None:
        """The policy a session was created under (None: no such session), read alone: what the
        gateway checks before it records a turn in a session (see :attr:`SessionMeta.recorded_by_gateway`)."""
        ...

    def names(self) -> list[str]:
        """Every session name, sorted."""
        ...

    def append_turn(
        self, name: str, turn: Turn, ledger_entries: list[dict[str, Any]], *, next_index: bool = False
    ) -> Turn:
        """Store a turn and the ledger entries it adds, atomically; with ``next_index`` the turn
        takes the session's next index (concurrent writers of one session); returns it as stored."""
        ...

    def count_turns(self, name: str) -> int:
        """How many turns a session has."""
        ...

    def turns(self, name: str) -> list[Turn]:
        """A session's turns in order."""
        ...

    def last_turn(self, name: str) -> Turn | None:
        """A session's latest turn (None: no turn, or no such session)."""
        ...

    def ledger(self, name: str) -> list[dict[str, Any]]:
        """A session's ledger entries in order."""
        ...

    def serialized(self, name: str) -> AbstractContextManager[None]:
        """Hold session ``name``'s write lock for a block that reads it and appends to it: a
        writer in another process waits for the block instead of taking the same turn number."""
        ...

    def calibration_update(self, key: str, update: CalibrationUpdate) -> Mapping[str, Any]:
        """Atomically read the JSON state stored for ``key`` (None when absent), apply ``update``
        and store its result, holding the key's lock throughout; returns the state as stored."""
        ...

    def calibration_states(self) -> dict[str, Mapping[str, Any]]:
        """Every calibration key's stored state."""
        ...

    def ping(self) -> None:
        """A cheap round trip to the store; raises StoreError when it cannot serve (its
        StoreUnavailable when a server cannot be reached)."""
        ...

    def schema_version(self) -> int:
        """The highest schema migration applied."""
        ...

    @property
    def location(self) -> str:
        """Where the store is, fit to print: a file's path, or a server's URL without password."""
        ...

    def close(self) -> None:
        """Release the store's connections."""
        ...


# The highest turn index or ledger seq of a session (see SQLiteStore._last).
_LAST = {
    "turns": "SELECT MAX(idx) FROM turns WHERE session = ?",
    "ledger": "SELECT MAX(seq) FROM ledger WHERE session = ?",
}


def _canonical(value: Any) -> str:
    """The stored text of ``value``: keys sorted, no spaces, characters as they are (not escaped;
    :func:`~ctxbudget.formats.jsonvalue.compact_json`: 0.7 ms against 1.9 ms for a turn holding a
    500 kB question, which a gateway commits before it answers)."""
    return compact_json(value, sort_keys=True)


def first_missing(numbers: list[int], what: str, name: str) -> str | None:
    """Which of a session's turns or ledger entries (``what``) is missing from ``numbers`` (their
    indexes in order), in a damage's words, or None: each is numbered 1, 2, ... as it is added
    and none is ever removed. A store with a turn's row deleted listed the others as the session,
    and its next turn was refused as numbered wrong."""
    for expected, number in enumerate(numbers, 1):
        if number != expected:
            return f"session {name!r} has no {what} {expected}"
    return None


def as_stored(value: Any) -> Any:
    """``value`` as a store gives it back (keys in sorted order): what a session keeps in memory,
    so that its turns and ledger are the same in the process that added them and in one that
    reopened the session."""
    return json.loads(_canonical(value))


def no_session(name: str, where: str, names: list[str]) -> ConfigError:
    """A name no session has: the store's few names, or of many the closest and how many there
    are (every name of 20,000 made one 300 kB line)."""
    if len(names) <= 10:
        return ConfigError(f"no session {name!r} in {where}; sessions: {', '.join(names) or 'none'}")
    import difflib  # only a name not found needs it

    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    near = f"; closest: {', '.join(close)}" if close else ""
    return ConfigError(
        f"no session {name!r} in {where} ({len(names):,} sessions{near}; `session list` names them all)"
    )


def content_key(body: str) -> str:
    """The sha256 (hex) by which a canonical JSON body is stored once."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def state_text(key: str, state: Any) -> str:
    """A calibration update's result as canonical JSON; anything but a JSON object is misuse."""
    if not isinstance(state, Mapping):
        raise ConfigError(f"calibration update for {key!r} returned {type(state).__name__}, not a mapping")
    try:
        return _canonical(dict(state))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"calibration state for {key!r} is not JSON: {exc}") from exc


def connect_store(
    target: str | os.PathLike[str],
    *,
    mode: StoreMode = "create",
    busy_timeout_seconds: float = 30.0,
    background_checkpoints: bool = False,
) -> SessionStore:
    """The store at ``target``: a ``postgresql://`` (or ``postgres://``, any case) URL opens a
    :class:`~ctxbudget.session.postgres.PostgresStore` (needs the ``postgres`` extra), anything
    else is the path of an :class:`SQLiteStore` file. ``mode`` and ``busy_timeout_seconds`` mean
    the same for both (how long a write waits for another writer's lock);
    ``background_checkpoints`` is the SQLite store's (a PostgreSQL server checkpoints on its own)."""
    if not isinstance(target, str | os.PathLike):
        raise ConfigError(f"a store is a file's path or a postgresql:// URL, got {type(target).__name__}")
    location = os.fspath(target)
    check_store_options(location, mode, busy_timeout_seconds)
    if location.lower().startswith(POSTGRES_SCHEMES):
        from .postgres import PostgresStore

        return PostgresStore(location, mode=mode, busy_timeout_seconds=busy_timeout_seconds)
    return SQLiteStore(
        location,
        mode=mode,
        busy_timeout_seconds=busy_timeout_seconds,
        background_checkpoints=background_checkpoints,
    )


def check_store_options(location: object, mode: object, busy_timeout_seconds: object) -> None:
    """A location that names something, a mode opening knows and a finite wait of 0 or more
    (``mode="bogus"`` was told the store did not exist, ``""`` that it was a folder; a NaN or
    negative wait was taken)."""
    if location in ("", b""):
        raise ConfigError("a store is a file's path or a postgresql:// URL, got an empty one")
    if mode not in ("create", "write", "read"):
        raise ConfigError(f'a store\'s mode is "create", "write" or "read", got {mode!r:.40}')
    wait = busy_timeout_seconds
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < float("inf"):
        raise ConfigError(f"busy_timeout_seconds is a finite number of seconds >= 0, got {wait!r:.40}")


PING_WRITE_SECONDS = 0.2  # how long a health check waits for the file's write lock
# The room on the disk a write check asks for: twice the largest transaction's bodies tried (a
# commit writes them to the log, and a checkpoint copies them into the file again), and this.
MIN_FREE_BYTES = 1 << 20


class SQLiteStore:
    """A :class:`SessionStore` in one SQLite file (``":memory:"`` for a throwaway one).

    ``mode`` says what opening may do: ``"create"`` makes the file and its tables when missing,
    ``"write"`` needs the file to exist, ``"read"`` needs it and opens it read-only (commands that
    only read never create a store). A file that cannot serve as a store, and any failure of it
    later (locked past ``busy_timeout_seconds``, full, read-only, damaged), is a
    :class:`~ctxbudget.errors.StoreError` naming the file and the cause. With
    ``background_checkpoints`` a commit never copies the write-ahead log into the file: a thread
    of the store does, off the committing thread (see :mod:`._checkpoints`; the gateway's stores,
    whose answers wait for their commits)."""

    def __init__(
        self,
        path: str | Path,
        *,
        mode: StoreMode = "create",
        busy_timeout_seconds: float = 30.0,
        background_checkpoints: bool = False,
    ) -> None:
        check_store_options(os.fspath(path), mode, busy_timeout_seconds)
        self.path = str(path)
        self.mode = mode
        self.busy_timeout_seconds = busy_timeout_seconds
        self._db = open_store(self.path, mode, busy_timeout_seconds)
        # the file as opened, found again by its absolute path (the process may change directory)
        self._absolute = self.path if self.path == ":memory:" else os.path.abspath(self.path)
        self._identity = _identity(self._absolute)
        # One writer at a time in this process; re-entrant for writes inside serialized().
        self._lock = threading.RLock()
        self._reads = Readers(
            self._absolute, self._db, self._lock, mode, busy_timeout_seconds, self._check_file
        )
        self._written = 0  # bytes of bodies stored by the open transaction
        self._largest = 0  # the most any transaction tried to store
        self._checkpoints: BackgroundCheckpoints | None = None
        if background_checkpoints and self.path != ":memory:" and mode != "read":
            self._db.execute("PRAGMA wal_autocheckpoint=0")  # a commit never copies the log
            page_size = int(self._db.execute("PRAGMA page_size").fetchone()[0])
            self._checkpoints = BackgroundCheckpoints(self._absolute, page_size, busy_timeout_seconds)

    def _check_file(self) -> None:
        """The file opened is still the one at the path: a store removed or replaced while open
        keeps answering, its writes going to a file nobody can find again."""
        if self._identity is not None and _identity(self._absolute) != self._identity:
            raise StoreError(
                self.path,
                "was removed or replaced while it was open",
                "put the file back, or restart with the new store: turns written now would be lost",
            )

    def _failures(self) -> AbstractContextManager[None]:
        return mapped_errors(self.path, self.busy_timeout_seconds)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write transaction of its own, or a savepoint inside :meth:`serialized`'s."""
        with self._lock, self._failures():
            if self._db.in_transaction:
                with savepoint(self._db):
                    yield
            else:
                self._check_file()
                self._written = 0
                try:
                    with transaction(self._db, self.busy_timeout_seconds):
                        yield
                finally:
                    self._largest = max(self._largest, self._written)
                if self._checkpoints is not None:
                    self._checkpoints.wrote(self._written)

    @contextmanager
    def serialized(self, name: str) -> Iterator[None]:
        """Hold the write lock for the block (here the whole file's): what the block reads of
        session ``name`` is current, and no other writer, in this process or another, stores a
        turn before the block's own writes commit with it."""
        with self._writing():
            yield

    def schema_version(self) -> int:
        """The highest migration applied."""
        with self._failures():
            row = self._db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    @property
    def location(self) -> str:
        """The file's path."""
        return self.path

    def ping(self) -> None:
        """A read of the schema table: a closed, unreadable, removed or replaced store raises
        StoreError."""
        self._check_file()
        with self._failures():  # a read: it answers while a commit waits for another process's lock
            self._rows("SELECT 1 FROM schema_migrations LIMIT 1")

    def ping_write(self) -> None:
        """The file's write lock taken and given back at once (waiting at most
        :data:`PING_WRITE_SECONDS`): StoreError when a turn could not be stored now, as after a
        commit that timed out while another process held the lock, which a read does not show
        (under WAL it answers while the lock is held)."""
        self._check_file()
        self._check_room()
        if not self._lock.acquire(blocking=False):
            raise StoreError(self.path, "is busy: a commit is waiting for the file's lock", "retry shortly")
        try:
            if self._db.in_transaction:  # this thread writes (serialized()): it holds the lock
                return
            with mapped_errors(self.path, PING_WRITE_SECONDS):
                self._db.execute(f"PRAGMA busy_timeout = {int(PING_WRITE_SECONDS * 1000)}")
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.execute("ROLLBACK")
                finally:
                    self._db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_seconds * 1000)}")
        finally:
            self._lock.release()

    def _check_room(self) -> None:
        """StoreError when the file's disk has less room than :data:`MIN_FREE_BYTES` and twice the
        largest transaction tried. Taking the lock writes nothing, so after a commit failed on a
        full disk it passed, the next request was sent upstream (billed) and its commit failed
        again: every other request was answered and withheld."""
        if self.path == ":memory:":
            return
        try:
            free = shutil.disk_usage(os.path.dirname(self._absolute)).free
        except OSError:
            return  # the file's own checks say what is wrong with its folder
        needed = MIN_FREE_BYTES + 2 * self._largest
        if free < needed:
            raise StoreError(
                self.path,
                f"has {free:,} bytes free on its disk, less than the {needed:,} a turn may need",
                "free space on the disk",
            )

    def calibration_update(self, key: str, update: CalibrationUpdate) -> Mapping[str, Any]:
        """Read, update and store ``key``'s state in one write transaction (the file's lock)."""
        with self._writing():
            row = self._db.execute("SELECT state FROM calibration WHERE key = ?", (key,)).fetchone()
            body = state_text(key, update(json.loads(row[0]) if row else None))
            self._db.execute(
                "INSERT INTO calibration (key, state) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET state = excluded.state",
                (key, body),
            )
        result: Mapping[str, Any] = json.loads(body)
        return result

    def calibration_states(self) -> dict[str, Mapping[str, Any]]:
        """Every key's state (none in a store of schema version 1, opened to read)."""
        with self._failures():
            found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'calibration'"
            if self._db.execute(found).fetchone() is None:
                return {}
            rows = self._db.execute("SELECT key, state FROM calibration ORDER BY key").fetchall()
            return {key: json.loads(state) for key, state in rows}

    def _put(self, value: Any) -> str:
        return self._put_text(_canonical(value))

    def _put_text(self, body: str) -> str:
        """Store a value's canonical text (:func:`_canonical`) under its hash; the hash."""
        sha = content_key(body)
        self._db.execute("INSERT OR IGNORE INTO content (sha256, body) VALUES (?, ?)", (sha, body))
        self._written += len(body) if body.isascii() else len(body.encode("utf-8"))
        return sha

    def _get(self, sha: str) -> Any:
        """A stored value, checked against the hash it is stored under: damage inside a record
        (one flipped byte) leaves SQLite's pages whole, so ``quick_check`` passes it, and it
        ended every command in a decoding traceback."""
        rows = self._rows("SELECT body FROM content WHERE sha256 = ?", (sha,))
        row = rows[0] if rows else None
        if row is None or not isinstance(row[0], str) or content_key(row[0]) != sha:
            found = "is missing" if row is None else "does not match its hash"
            raise StoreError(self.path, f"is damaged (stored content {sha[:12]} {found})", DAMAGED_HINT)
        return json.loads(row[0])

    def create(self, meta: SessionMeta) -> SessionMeta:
        """Create a session (its base items stored once by hash); the metadata as stored."""
        body = _canonical(dict(meta.base))
        with self._writing():
            if self._db.execute("SELECT 1 FROM sessions WHERE name = ?", (meta.name,)).fetchone():
                raise ConfigError(f"session {meta.name!r} already exists in {self.path}")
            base = self._put_text(body)
            self._db.execute(
                "INSERT INTO sessions (name, policy, model, base_sha256) VALUES (?, ?, ?, ?)",
                (meta.name, meta.policy, meta.model, base),
            )
        return dataclasses.replace(meta, base=json.loads(body))

    def meta(self, name: str) -> SessionMeta:
        """A session's metadata."""
        with self._failures():
            rows = self._rows("SELECT policy, model, base_sha256 FROM sessions WHERE name = ?", (name,))
            if not rows:
                raise no_session(name, self.path, self.names())
            policy, model, base = rows[0]
            return SessionMeta(name=name, policy=policy, model=model, base=self._get(base))

    def policy_of(self, name: str) -> str | None:
        """The policy a session was created under (None: no such session)."""
        with self._failures():
            rows = self._rows("SELECT policy FROM sessions WHERE name = ?", (name,))
            return str(rows[0][0]) if rows else None

    def names(self) -> list[str]:
        """Every session name, sorted."""
        with self._failures():
            return [row[0] for row in self._rows("SELECT name FROM sessions ORDER BY name")]

    def append_turn(
        self, name: str, turn: Turn, ledger_entries: list[dict[str, Any]], *, next_index: bool = False
    ) -> Turn:
        """One transaction: the turn, its content, and the ledger entries it adds. With
        ``next_index`` the turn is numbered inside the transaction (no other writer can take it)."""
        with self._writing():
            known = self._db.execute("SELECT 1 FROM sessions WHERE name = ?", (name,)).fetchone() is not None
            if known:
                turn = self._append(name, turn, ledger_entries, next_index)
        if not known:  # named after the transaction, whose lock the listing would wait behind
            raise no_session(name, self.path, self.names())
        return turn

    def _append(self, name: str, turn: Turn, ledger_entries: list[dict[str, Any]], next_index: bool) -> Turn:
        """:meth:`append_turn`'s writes, in its transaction, for a session that exists."""
        expected = self._last("turns", name) + 1
        if next_index:
            turn = dataclasses.replace(turn, index=expected)
        if turn.index != expected:
            raise ConfigError(f"session {name!r} expects turn {expected}, got turn {turn.index}")
        self._db.execute(
            "INSERT INTO turns (session, idx, turn_sha256) VALUES (?, ?, ?)",
            (name, turn.index, self._put(turn.to_dict())),
        )
        seq = self._last("ledger", name) if ledger_entries else 0
        for offset, entry in enumerate(ledger_entries, 1):
            self._db.execute(
                "INSERT INTO ledger (session, seq, entry_sha256) VALUES (?, ?, ?)",
                (name, seq + offset, self._put(entry)),
            )
        return turn

    def _last(self, table: Literal["turns", "ledger"], name: str, *, writing: bool = True) -> int:
        """The session's highest turn index or ledger seq (0: none), which is how many it has:
        :meth:`append_turn` numbers each 1, 2, ... and none is ever removed. Read from the primary
        key's end (``COUNT(*)`` read every row of the session, so a gateway session's commit grew
        with its turns); in the write transaction, or (``writing=False``) on a reader."""
        query = _LAST[table]
        rows = self._db.execute(query, (name,)).fetchall() if writing else self._rows(query, (name,))
        return int(rows[0][0] or 0)

    def _rows(self, query: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
        """A read's rows, fetched whole on the connection :class:`Readers` picks."""
        with self._reads.reading() as db:
            return db.execute(query, parameters).fetchall()

    def count_turns(self, name: str) -> int:
        """How many turns a session has."""
        with self._failures():
            return self._last("turns", name, writing=False)

    def turns(self, name: str) -> list[Turn]:
        """A session's turns in order."""
        with self._failures():
            rows = self._rows("SELECT idx, turn_sha256 FROM turns WHERE session = ? ORDER BY idx", (name,))
            self._numbered([row[0] for row in rows], "turn", name)
            return [Turn.from_dict(self._get(row[1])) for row in rows]

    def last_turn(self, name: str) -> Turn | None:
        """A session's latest turn (None: no turn, or no such session)."""
        with self._failures():
            rows = self._rows(
                "SELECT turn_sha256 FROM turns WHERE session = ? ORDER BY idx DESC LIMIT 1", (name,)
            )
            return Turn.from_dict(self._get(rows[0][0])) if rows else None

    def ledger(self, name: str) -> list[dict[str, Any]]:
        """A session's ledger entries in order."""
        with self._failures():
            rows = self._rows("SELECT seq, entry_sha256 FROM ledger WHERE session = ? ORDER BY seq", (name,))
            self._numbered([row[0] for row in rows], "ledger entry", name)
            return [self._get(row[1]) for row in rows]

    def _numbered(self, numbers: list[int], what: str, name: str) -> None:
        """A :class:`StoreError` naming the first of ``numbers`` missing (:func:`first_missing`)."""
        missing = first_missing(numbers, what, name)
        if missing is not None:
            raise StoreError(self.path, f"is damaged ({missing})", DAMAGED_HINT)

    def close(self) -> None:
        """Close the connections (the checkpointer's first: the last to close checkpoints)."""
        if self._checkpoints is not None:
            self._checkpoints.close()
        self._reads.close()
        self._db.close()
