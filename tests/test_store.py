from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxbudget import ConfigError
from ctxbudget.session import SessionMeta, SQLiteStore, Turn


def _store(tmp_path: Path) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "s.db")
    store.create(SessionMeta(name="a", policy="legal-review", model="gpt-4o", base={"items": []}))
    return store


def test_migrations_wal_and_content_stored_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.schema_version() == 2
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    entry = {"turn": 1, "status": "OK"}
    store.append_turn("a", Turn(index=1, question="same", answer="same"), [entry])
    store.create(SessionMeta(name="b", policy="legal-review", model="gpt-4o", base={"items": []}))
    store.append_turn("b", Turn(index=1, question="same", answer="same"), [entry])
    rows = store._db.execute("SELECT COUNT(*) FROM content").fetchone()[0]
    assert rows == 3  # one base, one turn, one entry: shared by both sessions
    reopened = SQLiteStore(tmp_path / "s.db")
    assert reopened.schema_version() == 2 and [t.question for t in reopened.turns("a")] == ["same"]


def test_a_failed_turn_leaves_nothing_behind(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(ConfigError, match="expects turn 1"):
        store.append_turn("a", Turn(index=2, question="q"), [{"turn": 2}])
    assert store.turns("a") == [] and store.ledger("a") == []


def test_unknown_session_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sessions: a"):
        _store(tmp_path).meta("zzz")


WRITER = """
import sys
from ctxbudget.session import SessionMeta, SQLiteStore, Turn
store = SQLiteStore(sys.argv[1])
store.create(SessionMeta(name="s", policy="legal-review", model="gpt-4o", base={"items": []}))
for i in range(1, 100000):
    big = "x" * 200000 + str(i)
    store.append_turn("s", Turn(index=i, question=big, answer=big), [{"turn": i, "n": [big] * 5}])
    print(i, flush=True)
"""


def test_a_writer_killed_mid_turn_loses_no_committed_turn(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    committed = 0
    deadline = time.monotonic() + 60
    while committed < 25 and time.monotonic() < deadline:
        committed = int(child.stdout.readline())
    os.kill(child.pid, signal.SIGKILL)  # lands somewhere inside the next turn's transaction, or between
    child.wait()
    store = SQLiteStore(path)
    turns = store.turns("s")
    ledger = store.ledger("s")
    assert len(turns) >= committed
    assert [t.index for t in turns] == list(range(1, len(turns) + 1))
    assert [e["turn"] for e in ledger] == [t.index for t in turns]  # no half turn: each turn has its entry
    assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
