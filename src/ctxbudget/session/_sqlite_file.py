"""The SQLite file under a session store: opened, checked, migrated, and its failures named.

Every way the file can fail ends in one :class:`~ctxbudget.errors.StoreError` naming the file,
the cause (SQLite's own words where it has them) and what to do: missing (a store opened to read
or to add to is never created), not a database, a foreign schema, a newer schema than this code
knows, locked by another process past the busy timeout, read-only, full, or damaged.

Creation and migration run in one ``BEGIN IMMEDIATE`` transaction that reads ``schema_migrations``
again once it holds the write lock, so processes opening a new file at once queue on the lock: the
first creates the tables and the others find them (deciding before the lock and creating after it
let two openers both create them, "table content already exists"). A file already current is
opened without the write lock, so opening it while another process writes does not wait.

``PRAGMA quick_check`` runs on every open: it walks every page of the file (b-tree structure,
records, overflow chains, free list) without comparing indexes with their tables, so damage in
the middle of the file is found on open, not by whichever later read lands on it. Its cost grows
with the file: on a store of 3,000 turns as the simulation records them (77 KB each with their
reports, 236 MB) it took 54 ms with the file in the OS cache and 460 ms cold (page cache dropped);
on 3,000 short turns (7 MB), 6 ms. A command opens the store once; the gateway at start-up.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, TypeVar

from ..errors import StoreError

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "Readers",
    "StoreMode",
    "check_version",
    "mapped_errors",
    "open_store",
    "pending_migrations",
    "savepoint",
    "transaction",
]

# "create": the file and its tables are made when missing; "write": the file must exist (it is
# migrated); "read": the file must exist and is opened read-only (nothing is created or migrated).
StoreMode = Literal["create", "write", "read"]
T = TypeVar("T")

# The schema, numbered: SQL that SQLite and PostgreSQL both run (the PostgreSQL store runs these
# scripts in its own schema, ``ctxbudget``), so one list defines both stores' tables.
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
        CREATE TABLE content (sha256 TEXT PRIMARY KEY, body TEXT NOT NULL);
        CREATE TABLE sessions (
            name TEXT PRIMARY KEY, policy TEXT NOT NULL, model TEXT NOT NULL,
            base_sha256 TEXT NOT NULL REFERENCES content(sha256)
        );
        CREATE TABLE turns (
            session TEXT NOT NULL REFERENCES sessions(name), idx INTEGER NOT NULL,
            turn_sha256 TEXT NOT NULL REFERENCES content(sha256), PRIMARY KEY (session, idx)
        );
        CREATE TABLE ledger (
            session TEXT NOT NULL REFERENCES sessions(name), seq INTEGER NOT NULL,
            entry_sha256 TEXT NOT NULL REFERENCES content(sha256), PRIMARY KEY (session, seq)
        );
        """,
    ),
    (
        2,
        """
        CREATE TABLE calibration (key TEXT PRIMARY KEY, state TEXT NOT NULL);
        """,
    ),
)
LATEST_VERSION = max(version for version, _ in MIGRATIONS)
# What reading sessions needs (migration 1): a store of an older version than this code's still
# serves the read-only commands, which never migrate it.
SESSION_TABLES = frozenset({"schema_migrations", "content", "sessions", "turns", "ledger"})
STORE_TABLES = SESSION_TABLES | {"calibration"}

DAMAGED_HINT = "restore it from a backup, or salvage what it holds with sqlite3 FILE .recover"
# SQLite's primary result codes: what each says about the store's file, and what to do.
_CAUSES: dict[int, tuple[str, str]] = {
    sqlite3.SQLITE_BUSY: (
        "is locked by another process",
        "retry when the other writer is done, or find the process that holds it",
    ),
    # a reader of a read-only file leaves its -wal and -shm files read-only too (SQLite gives them
    # the file's mode): with the file alone made writable, every write was refused again
    sqlite3.SQLITE_READONLY: (
        "is read-only",
        "make the file, its -wal and -shm files and its folder writable, or use another store",
    ),
    sqlite3.SQLITE_FULL: ("cannot be written", "free space on its disk, then retry"),
    sqlite3.SQLITE_NOTADB: (
        "is not an SQLite database",
        "check the path, or move the file aside to start a new store",
    ),
    sqlite3.SQLITE_CORRUPT: ("is damaged", DAMAGED_HINT),
    sqlite3.SQLITE_CANTOPEN: ("cannot be opened", "check that its folder exists and can be written"),
    sqlite3.SQLITE_IOERR: ("could not be read or written", "check the disk it is on"),
}
_CAUSES[sqlite3.SQLITE_LOCKED] = _CAUSES[sqlite3.SQLITE_BUSY]
_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
MAX_RETRIES = 50  # busy answers that bypass SQLite's own wait (WAL recovery, a journal switch)


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


# Extended result codes that say more than their primary one: SQLite answers a full disk while
# growing the WAL's shared-memory file with a plain "disk I/O error" (SQLITE_IOERR_SHMSIZE).
_EXTENDED: dict[int, tuple[str, str, str]] = {
    sqlite3.SQLITE_IOERR_SHMSIZE: (
        "cannot be written",
        "no room to grow its -shm file",
        _CAUSES[sqlite3.SQLITE_FULL][1],
    ),
}


# Python's own error for a stored text that is not UTF-8 (a damaged byte inside a record, which
# quick_check passes): it quotes the text, a client's question or answer, and has no SQLite code.
_NOT_UTF8 = re.compile(r"Could not decode to UTF-8 column '([^']*)'")


def store_error(path: str, exc: sqlite3.Error, busy_timeout_seconds: float) -> StoreError:
    """The store error for an SQLite one: what it says about the file, in one line."""
    not_utf8 = _NOT_UTF8.match(str(exc))
    if not_utf8 is not None:  # "failed (...<the stored text>...); check the file"
        return StoreError(path, f"is damaged (a stored {not_utf8.group(1)} is not UTF-8 text)", DAMAGED_HINT)
    code = _primary_code(exc)
    what, hint = _CAUSES.get(code if code is not None else -1, ("failed", "check the file"))
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    extended = _EXTENDED.get(getattr(exc, "sqlite_errorcode", None) or -1)
    if extended is not None:
        what, hint = extended[0], extended[2]
        detail = f"{detail}: {extended[1]}; is its disk full?"
    if code in _BUSY:
        detail = f"gave up after {busy_timeout_seconds:g} s: {detail}"
    return StoreError(path, f"{what} ({detail})", hint)


@contextmanager
def mapped_errors(path: str, busy_timeout_seconds: float) -> Iterator[None]:
    """SQLite errors raised in the block become :class:`StoreError` naming ``path``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(path, exc, busy_timeout_seconds) from exc
    except UnicodeDecodeError as exc:
        # SQLite's message quoted bytes of the file that are not UTF-8 ("malformed database
        # schema (...) - near "<damaged text>""), which Python could not decode: a traceback
        raise StoreError(
            path, "is damaged (SQLite's error about it quotes text that is not UTF-8)", DAMAGED_HINT
        ) from exc


def _retrying(action: Callable[[], T], busy_timeout_seconds: float) -> T:
    """``action``, tried again while SQLite answers busy, until the busy timeout has passed.

    SQLite's busy handler already waits for a lock up to the timeout; some busy answers come at
    once (another connection recovering the WAL, or switching the journal mode), and those are
    tried again after a short sleep, a bounded number of times."""
    deadline = time.monotonic() + busy_timeout_seconds
    for attempt in range(MAX_RETRIES + 1):
        try:
            return action()
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if _primary_code(exc) not in _BUSY or left <= 0 or attempt == MAX_RETRIES:
                raise
            time.sleep(min(0.005 * 2**attempt, 0.1, left))
    raise AssertionError("unreachable")


@contextmanager
def transaction(db: sqlite3.Connection, busy_timeout_seconds: float) -> Iterator[None]:
    """One write transaction holding the file's write lock from its start (``BEGIN IMMEDIATE``):
    what it reads no other writer changes before it commits. On an error it is rolled back unless
    SQLite already did (a full disk rolls it back itself; rolling back again would hide why)."""
    _retrying(lambda: db.execute("BEGIN IMMEDIATE"), busy_timeout_seconds)
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextmanager
def savepoint(db: sqlite3.Connection) -> Iterator[None]:
    """A step inside an open transaction that is undone alone when it fails."""
    db.execute("SAVEPOINT step")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK TO step")
            db.execute("RELEASE step")
        raise
    db.execute("RELEASE step")


def pending_migrations(applied: set[int]) -> Iterator[tuple[int, list[str]]]:
    """The migrations not applied yet, in order, each as its SQL statements (both stores run the
    same scripts)."""
    for version, script in MIGRATIONS:
        if version not in applied:
            yield version, [statement for statement in script.split(";") if statement.strip()]


def open_store(path: str, mode: StoreMode, busy_timeout_seconds: float) -> sqlite3.Connection:
    """A connection to a checked store file: it exists (unless ``mode`` creates it), it passes
    ``quick_check``, and its schema is this code's (created or migrated unless ``mode`` reads).
    A file that is not a store is refused before anything is written to it."""
    if path != ":memory:" and Path(path).is_dir():
        raise StoreError(
            path, "is a folder, not a file", "give the path of a store file (created when missing)"
        )
    if mode != "create" and path != ":memory:" and not Path(path).is_file():
        raise StoreError(path, "does not exist", "check the path (a store is created with its first session)")
    db: sqlite3.Connection | None = None
    try:
        with mapped_errors(path, busy_timeout_seconds):
            db = _connect(path, mode, busy_timeout_seconds)
            _check_pages(db, path)
            current = _check_schema(db, path, mode)
            if mode != "read":
                _retrying(lambda: db.execute("PRAGMA journal_mode=WAL").fetchall(), busy_timeout_seconds)
                db.execute("PRAGMA synchronous=FULL")
            if not current:
                with transaction(db, busy_timeout_seconds):
                    _migrate(db, path)
    except BaseException:
        if db is not None:
            db.close()
        raise
    return db


def read_uri(file: Path, folder_writable: bool, wal_bytes: int) -> str:
    """The URI that opens ``file`` to read. Read-only, and also ``immutable`` when its folder
    cannot be written and no write-ahead log holds data: SQLite would need to create the log's
    ``-shm`` index next to the file (a backup on read-only media, a snapshot, a volume mounted
    ``:ro`` could not be listed), and where nothing can create a log no writer can be at work."""
    return file.as_uri() + ("?mode=ro&immutable=1" if not folder_writable and wal_bytes == 0 else "?mode=ro")


def _wal_bytes(file: Path) -> int:
    try:
        return (file.parent / (file.name + "-wal")).stat().st_size
    except OSError:
        return 0


def _connect(path: str, mode: StoreMode, busy_timeout_seconds: float) -> sqlite3.Connection:
    """The connection, read-only for reading (a missing file is not created, see
    :func:`read_uri`); it waits up to the busy timeout for another connection's lock."""
    target, uri = path, False
    if mode == "read":
        file = Path(path).resolve()
        target, uri = read_uri(file, os.access(file.parent, os.W_OK), _wal_bytes(file)), True
    db = sqlite3.connect(
        target, uri=uri, isolation_level=None, check_same_thread=False, timeout=busy_timeout_seconds
    )
    db.execute("PRAGMA foreign_keys=ON")
    return db


def _check_pages(db: sqlite3.Connection, path: str) -> None:
    """``PRAGMA quick_check`` (see the module's docstring for its cost): damage anywhere in the
    file is found on open, not by the turn that happens to read the page."""
    rows = db.execute("PRAGMA quick_check").fetchall()
    if rows != [("ok",)]:
        # its first line may only name the database ("*** in database main ***"): the first that
        # says what is wrong
        lines = [line for row in rows for line in str(row[0]).splitlines() if line.strip()]
        first = next(
            (line for line in lines if not line.startswith("***")), lines[0] if lines else "no answer"
        )
        raise StoreError(path, f"is damaged (quick_check: {first})", DAMAGED_HINT)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _foreign(path: str, tables: set[str]) -> StoreError:
    listed = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
    return StoreError(
        path,
        f"is an SQLite database but not a ctxbudget session store (its tables: {listed})",
        "check the path, or use another file",
    )


def _applied(db: sqlite3.Connection, path: str, tables: set[str]) -> set[int]:
    """The migrations applied; a ``schema_migrations`` table of another shape is a foreign file."""
    try:
        return {int(row[0]) for row in db.execute("SELECT version FROM schema_migrations")}
    except (sqlite3.OperationalError, ValueError, TypeError) as exc:
        raise _foreign(path, tables) from exc


def check_version(path: str, applied: set[int]) -> None:
    """A store written by a newer ctxbudget is refused (this code cannot know its schema)."""
    newest = max(applied, default=0)
    if newest > LATEST_VERSION:
        raise StoreError(
            path,
            f"has schema version {newest}, newer than this ctxbudget knows ({LATEST_VERSION})",
            "upgrade ctxbudget (pip install -U ctxbudget) to open it",
        )


def _check_schema(db: sqlite3.Connection, path: str, mode: StoreMode) -> bool:
    """Whether the file holds a current store (nothing to create or migrate), or one whose sessions
    can be read when ``mode`` reads; else it must hold an older one of this code's schema, or
    nothing yet, and be opened to write. Only a file that is not current takes the write lock, to
    migrate, where :func:`_migrate` decides again."""
    tables = _tables(db)
    if tables and "schema_migrations" not in tables:
        raise _foreign(path, tables)
    applied = _applied(db, path, tables) if tables else set()
    check_version(path, applied)
    current = tables.issuperset(STORE_TABLES) and applied.issuperset(v for v, _ in MIGRATIONS)
    if mode != "read" or current:
        return current
    if tables.issuperset(SESSION_TABLES) and 1 in applied:
        return True  # an older store: its sessions can be read; nothing is migrated to read
    if not tables:
        raise StoreError(path, "is empty (no session was ever stored in it)", "check the path")
    if max(applied, default=0) < LATEST_VERSION:
        raise StoreError(
            path,
            f"has schema version {max(applied, default=0)}, older than this ctxbudget reads ({LATEST_VERSION})",
            "open it once to write (add a turn) to migrate it",
        )
    raise _foreign(path, tables)


def _migrate(db: sqlite3.Connection, path: str) -> None:
    """Create or migrate the schema; run inside :func:`transaction` (idempotent), so the checks
    of :func:`_check_schema` are made again under the lock."""
    tables = _tables(db)
    if tables and "schema_migrations" not in tables:
        raise _foreign(path, tables)
    db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
    applied = _applied(db, path, tables)
    check_version(path, applied)
    for version, statements in pending_migrations(applied):
        for statement in statements:
            db.execute(statement)
        db.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))
    if not (found := _tables(db)).issuperset(STORE_TABLES):
        raise _foreign(path, found)


class Readers:
    """Which connection a read of the store uses. When no other thread is writing, the writer's
    connection, under the store's lock (a read sees every commit before it, and a read by the
    writing thread sees its own rows). While another thread writes, a second connection of its
    own, one read at a time (a statement left open would share its snapshot with the next): a
    commit that waits up to the busy timeout for another process's lock holds the writer's
    connection all that time, and the gateway reads a session's turn count on its event loop for
    every request. Under WAL that read takes the last committed state without waiting. The second
    connection is opened at its first read by the absolute path the store was opened at, never
    creating a file (a store moved away, or a changed working folder, must not get an empty
    database made in its place: opening one beside the store's write-ahead log deletes the log),
    after ``check`` (the file is still the one opened). A throwaway store in memory, and a store
    opened to read, have the one connection, read one at a time."""

    def __init__(
        self,
        absolute: str,
        writer: sqlite3.Connection,
        lock: threading.RLock,
        mode: StoreMode,
        busy_timeout_seconds: float,
        check: Callable[[], None],
    ) -> None:
        self._absolute = absolute
        self._writer = writer
        self._lock = lock
        self._own = absolute != ":memory:" and mode != "read"
        self._busy = busy_timeout_seconds
        self._check = check
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for one read (its rows fetched inside the block)."""
        if not self._own:
            with self._lock:
                yield self._writer
            return
        if self._lock.acquire(blocking=False):  # re-entrant: a writing thread reads its own rows
            try:
                yield self._writer
            finally:
                self._lock.release()
            return
        with self._reader_lock:
            if self._reader is None:
                self._check()
                uri = Path(self._absolute).as_uri() + "?mode=rw"  # never creates the file
                self._reader = sqlite3.connect(
                    uri, uri=True, isolation_level=None, check_same_thread=False, timeout=self._busy
                )
            yield self._reader

    def close(self) -> None:
        """Close the read connection (the writer's is its store's)."""
        if self._reader is not None:
            self._reader.close()
