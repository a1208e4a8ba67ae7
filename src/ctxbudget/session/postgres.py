"""Sessions in PostgreSQL: the :class:`~ctxbudget.session.store.SessionStore` several gateway
replicas share.

The same tables as the SQLite store (content once by sha256, sessions, turns, ledger, calibration,
numbered migrations; see :mod:`._postgres_database`), reached through a psycopg connection pool.
Each write is one transaction; the writes of one session (and the updates of one calibration
key) take a transaction-scoped advisory lock on a hash of its name, so turns appended by several
processes at once are numbered in order and each stored once. Needs the ``postgres`` extra
(``pip install 'ctxbudget[postgres]'``); psycopg is imported when a store is made.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, StoreError, StoreUnavailable
from ._postgres_database import (
    CALIBRATION_LOCKS,
    SCHEMA,
    SESSION_LOCKS,
    check_url,
    lock_key,
    mapped_errors,
    prepare_schema,
    redacted,
)
from ._sqlite_file import StoreMode
from .store import (
    CalibrationUpdate,
    SessionMeta,
    _canonical,
    content_key,
    first_missing,
    no_session,
    state_text,
)
from .turns import Turn

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["PostgresStore"]

_log = logging.getLogger(__name__)


def _driver(location: str) -> tuple[Any, Any]:
    """psycopg and its pool, or the error saying which extra to install."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise StoreError(
            location,
            f"needs the PostgreSQL driver, which is not installed ({exc})",
            "pip install 'ctxbudget[postgres]'",
        ) from exc
    return psycopg, psycopg_pool


class PostgresStore:
    """A :class:`~ctxbudget.session.store.SessionStore` in a PostgreSQL database (``url``:
    ``postgresql://user:password@host:port/database``; the database must exist).

    ``mode``: ``"create"`` creates or migrates the store's schema when needed, ``"write"``
    migrates it but needs it to exist, ``"read"`` creates nothing (a database without a store is
    an error) and opens read-only transactions. ``busy_timeout_seconds`` bounds a wait for another
    writer's lock; ``connect_timeout_seconds`` bounds reaching the server and waiting for a pooled
    connection (past it: :class:`~ctxbudget.errors.StoreUnavailable`); :meth:`ping` waits about a
    second, and renews the pool when the server is back after an outage. Every failure is a
    :class:`~ctxbudget.errors.StoreError` naming :attr:`location`, the URL without password."""

    def __init__(
        self,
        url: str,
        *,
        mode: StoreMode = "create",
        busy_timeout_seconds: float = 30.0,
        connect_timeout_seconds: float = 5.0,
        pool_size: int = 10,
    ) -> None:
        self._target, self.url, self._secrets = redacted(url)
        self.mode = mode
        self.busy_timeout_seconds = busy_timeout_seconds
        self.connect_timeout_seconds = connect_timeout_seconds
        self.pool_size = pool_size
        self._psycopg, self._pool_module = _driver(self.url)
        check_url(self._target, self.url, self._secrets)
        # The connection of a serialized() block, per thread: the block's reads and writes use it.
        self._held = threading.local()
        self._pool_lock = threading.Lock()  # one pool replacement at a time (see ping)
        self._closed = False
        with self._failures():
            with self._connect_directly(self.connect_timeout_seconds) as conn:
                prepare_schema(conn, self.url, mode)
            self._pool: psycopg_pool.ConnectionPool[Any] = self._open_pool()

    def _connect_directly(self, timeout_seconds: float) -> psycopg.Connection[Any]:
        """A connection of its own, outside the pool (the driver counts whole seconds)."""
        timeout = max(1, math.ceil(timeout_seconds))
        connection: psycopg.Connection[Any] = self._psycopg.connect(
            self._target, connect_timeout=timeout, autocommit=True
        )
        return connection

    def _open_pool(self) -> psycopg_pool.ConnectionPool[Any]:
        """A new pool, open, with its first connection made (or the driver's error)."""
        pool_class = self._pool_module.ConnectionPool
        pool: psycopg_pool.ConnectionPool[Any] = pool_class(
            self._target,
            min_size=1,
            max_size=max(1, self.pool_size),
            timeout=self.connect_timeout_seconds,
            kwargs={"autocommit": True, "connect_timeout": max(1, math.ceil(self.connect_timeout_seconds))},
            configure=self._configure,
            check=pool_class.check_connection,
            open=False,
        )
        try:
            pool.open(wait=True, timeout=self.connect_timeout_seconds)
        except BaseException:
            pool.close()
            raise
        return pool

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Each pooled connection: the store's schema, the lock wait, read-only when reading."""
        conn.execute(
            "SELECT set_config('search_path', %s, false), set_config('lock_timeout', %s, false), "
            "set_config('default_transaction_read_only', %s, false)",
            (SCHEMA, f"{round(self.busy_timeout_seconds * 1000)}ms", "on" if self.mode == "read" else "off"),
        )

    @property
    def location(self) -> str:
        """The URL without its password."""
        return self.url

    def _failures(self) -> AbstractContextManager[None]:
        return mapped_errors(self.url, self._secrets, self.busy_timeout_seconds)

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The serialized block's connection, or one from the pool for the block."""
        held: psycopg.Connection[Any] | None = getattr(self._held, "conn", None)
        if held is not None:
            yield held
            return
        with self._failures(), self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _transaction(self, *lock: int) -> Iterator[psycopg.Connection[Any]]:
        """A transaction (a savepoint inside :meth:`serialized`'s), holding advisory ``lock``."""
        with self._connection() as conn, self._failures(), conn.transaction():
            if lock:
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", lock)
            yield conn

    @contextmanager
    def serialized(self, name: str) -> Iterator[None]:
        """Hold session ``name``'s lock for the block, in one transaction: what the block reads of
        the session is current, and no other writer stores a turn of it before the block's own
        writes commit with it."""
        with self._transaction(SESSION_LOCKS, lock_key(name)) as conn:
            outer = getattr(self._held, "conn", None)
            self._held.conn = conn
            try:
                yield
            finally:
                self._held.conn = outer

    def schema_version(self) -> int:
        """The highest migration applied."""
        with self._connection() as conn:
            row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0) if row else 0

    def ping(self) -> None:
        """One round trip, within about a second or two; StoreUnavailable when the server cannot
        be reached. A server back after an outage serves again from here on: the pool may be
        backing off its reconnection (1, 2, 4, ... s), so when no pooled connection comes at
        once but a direct one answers, a pool short of connections is replaced by a fresh one (a
        pool whose every connection is in use is busy, not broken, and is kept)."""
        if getattr(self._held, "conn", None) is not None:
            with self._connection() as conn:
                conn.execute("SELECT 1").fetchone()
            return
        pool = self._pool
        wait_seconds = min(1.0, self.connect_timeout_seconds)
        try:
            with self._failures(), pool.connection(timeout=wait_seconds) as conn:
                conn.execute("SELECT 1").fetchone()
            return
        except StoreUnavailable:
            pass  # a pool backing off, or a server still away: ask the server itself
        with self._failures():
            with self._connect_directly(wait_seconds) as conn:
                conn.execute("SELECT 1").fetchone()
            stats = pool.get_stats()
            if stats.get("pool_size", 0) < stats.get("pool_max", 1):  # failing to grow, not busy
                self._replace_pool(pool)

    def _replace_pool(self, failing: psycopg_pool.ConnectionPool[Any]) -> None:
        """Swap in a fresh pool for ``failing`` (unless another thread did, or the store is
        closed). The old one closes in the background: its connections in use close when they
        are given back, and ping does not wait for its threads to stop."""
        with self._pool_lock:
            if self._closed or self._pool is not failing:
                return
            self._pool = self._open_pool()
        _log.info("session store %s: the server answers again; its connection pool was renewed", self.url)
        threading.Thread(target=failing.close, name="ctxbudget-old-pool", daemon=True).start()

    def _put(self, conn: psycopg.Connection[Any], value: Any) -> str:
        return self._put_text(conn, _canonical(value))

    def _put_text(self, conn: psycopg.Connection[Any], body: str) -> str:
        """Store a value's canonical text under its hash; the hash."""
        sha = content_key(body)
        conn.execute(
            "INSERT INTO content (sha256, body) VALUES (%s, %s) ON CONFLICT (sha256) DO NOTHING", (sha, body)
        )
        return sha

    def create(self, meta: SessionMeta) -> SessionMeta:
        """Create a session (its base items stored once by hash); the metadata as stored."""
        body = _canonical(dict(meta.base))
        with self._transaction() as conn:
            inserted = conn.execute(
                "INSERT INTO sessions (name, policy, model, base_sha256) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (meta.name, meta.policy, meta.model, self._put_text(conn, body)),
            )
            if inserted.rowcount == 0:
                raise ConfigError(f"session {meta.name!r} already exists in {self.url}")
        return dataclasses.replace(meta, base=json.loads(body))

    def meta(self, name: str) -> SessionMeta:
        """A session's metadata; unknown names raise ConfigError listing the known ones."""
        with self._connection() as conn:
            row = conn.execute(
                "SELECT s.policy, s.model, c.body FROM sessions s "
                "JOIN content c ON c.sha256 = s.base_sha256 WHERE s.name = %s",
                (name,),
            ).fetchone()
        if row is None:
            raise no_session(name, self.url, self.names())
        return SessionMeta(name=name, policy=row[0], model=row[1], base=json.loads(row[2]))

    def policy_of(self, name: str) -> str | None:
        """The policy a session was created under (None: no such session)."""
        with self._connection() as conn:
            row = conn.execute("SELECT policy FROM sessions WHERE name = %s", (name,)).fetchone()
        return str(row[0]) if row is not None else None

    def names(self) -> list[str]:
        """Every session name, sorted."""
        with self._connection() as conn:
            return [row[0] for row in conn.execute('SELECT name FROM sessions ORDER BY name COLLATE "C"')]

    def append_turn(
        self, name: str, turn: Turn, ledger_entries: list[dict[str, Any]], *, next_index: bool = False
    ) -> Turn:
        """One transaction under the session's lock: the turn, its content, and the ledger
        entries it adds. With ``next_index`` the turn takes the session's next index."""
        with self._transaction(SESSION_LOCKS, lock_key(name)) as conn:
            known = conn.execute("SELECT 1 FROM sessions WHERE name = %s", (name,)).fetchone() is not None
            if known:
                turn = self._append(conn, name, turn, ledger_entries, next_index)
        if not known:  # named after the transaction: listing the names takes a connection of its own
            raise no_session(name, self.url, self.names())
        return turn

    def _append(
        self,
        conn: psycopg.Connection[Any],
        name: str,
        turn: Turn,
        ledger_entries: list[dict[str, Any]],
        next_index: bool,
    ) -> Turn:
        """:meth:`append_turn`'s writes, in its transaction, for a session that exists."""
        expected = self._last(conn, "turns", name) + 1
        if next_index:
            turn = dataclasses.replace(turn, index=expected)
        if turn.index != expected:
            raise ConfigError(f"session {name!r} expects turn {expected}, got turn {turn.index}")
        conn.execute(
            "INSERT INTO turns (session, idx, turn_sha256) VALUES (%s, %s, %s)",
            (name, turn.index, self._put(conn, turn.to_dict())),
        )
        seq = self._last(conn, "ledger", name) if ledger_entries else 0
        for offset, entry in enumerate(ledger_entries, 1):
            conn.execute(
                "INSERT INTO ledger (session, seq, entry_sha256) VALUES (%s, %s, %s)",
                (name, seq + offset, self._put(conn, entry)),
            )
        return turn

    @staticmethod
    def _last(conn: psycopg.Connection[Any], table: Literal["turns", "ledger"], name: str) -> int:
        """The session's highest turn index or ledger seq (0: none), which is how many it has
        (see :meth:`ctxbudget.session.store.SQLiteStore._last`): the primary key's end, where
        ``COUNT(*)`` read every row of the session."""
        column = "idx" if table == "turns" else "seq"  # one of two names each, never input
        row = conn.execute(f"SELECT MAX({column}) FROM {table} WHERE session = %s", (name,)).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def count_turns(self, name: str) -> int:
        """How many turns a session has."""
        with self._connection() as conn:
            return self._last(conn, "turns", name)

    def _bodies(self, query: str, name: str) -> list[Any]:
        with self._connection() as conn:
            return [json.loads(row[0]) for row in conn.execute(query, (name,))]

    def _numbered(self, query: str, what: str, name: str) -> list[Any]:
        """The bodies of ``query``'s ``(number, body)`` rows, each numbered in turn from 1 and
        found (a :class:`StoreError` naming the first that is not: a damaged store)."""
        with self._connection() as conn:
            rows = conn.execute(query, (name,)).fetchall()
        missing = first_missing([row[0] for row in rows], what, name)
        if missing is None and any(row[1] is None for row in rows):
            missing = f"the stored content of a {what} of session {name!r} is missing"
        if missing is not None:
            raise StoreError(self.location, f"is damaged ({missing})", "restore it from a backup")
        return [json.loads(row[1]) for row in rows]

    def turns(self, name: str) -> list[Turn]:
        """A session's turns in order."""
        query = (
            "SELECT t.idx, c.body FROM turns t LEFT JOIN content c ON c.sha256 = t.turn_sha256 "
            "WHERE t.session = %s ORDER BY t.idx"
        )
        return [Turn.from_dict(body) for body in self._numbered(query, "turn", name)]

    def last_turn(self, name: str) -> Turn | None:
        """A session's latest turn (None: no turn, or no such session)."""
        query = "SELECT c.body FROM turns t JOIN content c ON c.sha256 = t.turn_sha256 WHERE t.session = %s"
        found = self._bodies(query + " ORDER BY t.idx DESC LIMIT 1", name)
        return Turn.from_dict(found[0]) if found else None

    def ledger(self, name: str) -> list[dict[str, Any]]:
        """A session's ledger entries in order."""
        query = (
            "SELECT l.seq, c.body FROM ledger l LEFT JOIN content c ON c.sha256 = l.entry_sha256 "
            "WHERE l.session = %s ORDER BY l.seq"
        )
        return self._numbered(query, "ledger entry", name)

    def calibration_update(self, key: str, update: CalibrationUpdate) -> Mapping[str, Any]:
        """Read, update and store ``key``'s state in one transaction holding the key's lock."""
        with self._transaction(CALIBRATION_LOCKS, lock_key(key)) as conn:
            row = conn.execute("SELECT state FROM calibration WHERE key = %s", (key,)).fetchone()
            body = state_text(key, update(json.loads(row[0]) if row else None))
            conn.execute(
                "INSERT INTO calibration (key, state) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET state = excluded.state",
                (key, body),
            )
        result: Mapping[str, Any] = json.loads(body)
        return result

    def calibration_states(self) -> dict[str, Mapping[str, Any]]:
        """Every key's state (none in a store of schema version 1, opened to read)."""
        with self._connection() as conn:
            found = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.calibration",)).fetchone()
            if found is None or found[0] is None:
                return {}
            rows = conn.execute('SELECT key, state FROM calibration ORDER BY key COLLATE "C"').fetchall()
        return {key: json.loads(state) for key, state in rows}

    def close(self) -> None:
        """Close the pool and its connections."""
        with self._pool_lock:
            self._closed = True
        self._pool.close()
