"""Session storage: a small interface, and the SQLite store behind it.

One file, WAL mode, numbered schema migrations, content stored once and referenced by its
sha256, and each turn (with the ledger entries it adds) committed in one transaction: a crash
mid-write loses no committed turn and leaves no half turn. A server store for several gateway
replicas can implement the same :class:`SessionStore` protocol.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError
from .turns import Turn

__all__ = ["MIGRATIONS", "SQLiteStore", "SessionMeta", "SessionStore"]


@dataclass(frozen=True, kw_only=True)
class SessionMeta:
    """A session's name, policy, model, and the stable items every turn starts from."""

    name: str
    policy: str
    model: str
    base: Mapping[str, Any]


class SessionStore(Protocol):
    """What sessions need from storage."""

    def create(self, meta: SessionMeta) -> None:
        """Create a session; a second one with the same name is an error."""
        ...

    def meta(self, name: str) -> SessionMeta:
        """A session's metadata; unknown names raise ConfigError listing the known ones."""
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
)


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class SQLiteStore:
    """A :class:`SessionStore` in one SQLite file (``":memory:"`` for a throwaway one)."""

    def __init__(self, path: str | Path, *, busy_timeout_seconds: float = 30.0) -> None:
        self.path = str(path)
        try:
            # A writer waits up to the busy timeout for another's lock instead of failing at once.
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_seconds
            )
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open session store {self.path!r}: {exc}") from exc
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
            done = {row[0] for row in self._db.execute("SELECT version FROM schema_migrations")}
            for version, script in MIGRATIONS:
                if version in done:
                    continue
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    for statement in filter(str.strip, script.split(";")):
                        self._db.execute(statement)
                    self._db.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))
                    self._db.execute("COMMIT")
                except sqlite3.Error:
                    self._db.execute("ROLLBACK")
                    raise

    def schema_version(self) -> int:
        """The highest migration applied."""
        row = self._db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    def _put(self, value: Any) -> str:
        body = _canonical(value)
        sha = hashlib.sha256(body.encode("utf-8")).hexdigest()
        self._db.execute("INSERT OR IGNORE INTO content (sha256, body) VALUES (?, ?)", (sha, body))
        return sha

    def _get(self, sha: str) -> Any:
        row = self._db.execute("SELECT body FROM content WHERE sha256 = ?", (sha,)).fetchone()
        return json.loads(row[0])

    def create(self, meta: SessionMeta) -> None:
        """Create a session (its base items stored once by hash)."""
        with self._lock:
            if self._db.execute("SELECT 1 FROM sessions WHERE name = ?", (meta.name,)).fetchone():
                raise ConfigError(f"session {meta.name!r} already exists in {self.path}")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                base = self._put(dict(meta.base))
                self._db.execute(
                    "INSERT INTO sessions (name, policy, model, base_sha256) VALUES (?, ?, ?, ?)",
                    (meta.name, meta.policy, meta.model, base),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def meta(self, name: str) -> SessionMeta:
        """A session's metadata."""
        row = self._db.execute(
            "SELECT policy, model, base_sha256 FROM sessions WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            known = ", ".join(self.names()) or "none"
            raise ConfigError(f"no session {name!r} in {self.path}; sessions: {known}")
        return SessionMeta(name=name, policy=row[0], model=row[1], base=self._get(row[2]))

    def names(self) -> list[str]:
        """Every session name, sorted."""
        return [row[0] for row in self._db.execute("SELECT name FROM sessions ORDER BY name")]

    def append_turn(
        self, name: str, turn: Turn, ledger_entries: list[dict[str, Any]], *, next_index: bool = False
    ) -> Turn:
        """One transaction: the turn, its content, and the ledger entries it adds. With
        ``next_index`` the turn is numbered inside the transaction (no other writer can take it)."""
        self.meta(name)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                expected = (
                    self._db.execute("SELECT COUNT(*) FROM turns WHERE session = ?", (name,)).fetchone()[0]
                    + 1
                )
                if next_index:
                    turn = dataclasses.replace(turn, index=expected)
                if turn.index != expected:
                    raise ConfigError(f"session {name!r} expects turn {expected}, got turn {turn.index}")
                self._db.execute(
                    "INSERT INTO turns (session, idx, turn_sha256) VALUES (?, ?, ?)",
                    (name, turn.index, self._put(turn.to_dict())),
                )
                seq = self._db.execute("SELECT COUNT(*) FROM ledger WHERE session = ?", (name,)).fetchone()[0]
                for offset, entry in enumerate(ledger_entries, 1):
                    self._db.execute(
                        "INSERT INTO ledger (session, seq, entry_sha256) VALUES (?, ?, ?)",
                        (name, seq + offset, self._put(entry)),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return turn

    def count_turns(self, name: str) -> int:
        """How many turns a session has."""
        return int(self._db.execute("SELECT COUNT(*) FROM turns WHERE session = ?", (name,)).fetchone()[0])

    def turns(self, name: str) -> list[Turn]:
        """A session's turns in order."""
        rows = self._db.execute("SELECT turn_sha256 FROM turns WHERE session = ? ORDER BY idx", (name,))
        return [Turn.from_dict(self._get(row[0])) for row in rows.fetchall()]

    def last_turn(self, name: str) -> Turn | None:
        """A session's latest turn (None: no turn, or no such session)."""
        row = self._db.execute(
            "SELECT turn_sha256 FROM turns WHERE session = ? ORDER BY idx DESC LIMIT 1", (name,)
        ).fetchone()
        return Turn.from_dict(self._get(row[0])) if row else None

    def ledger(self, name: str) -> list[dict[str, Any]]:
        """A session's ledger entries in order."""
        rows = self._db.execute("SELECT entry_sha256 FROM ledger WHERE session = ? ORDER BY seq", (name,))
        return [self._get(row[0]) for row in rows.fetchall()]

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
