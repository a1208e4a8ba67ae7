from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import ConfigError
from ctxbudget.session import SessionMeta, SQLiteStore, Turn
from ctxbudget.session.store import _canonical


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


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON)
def test_stored_text_is_the_unescaped_canonical_json_whichever_encoder_wrote_it(value: object) -> None:
    # Content is stored under the hash of this text: an ASCII value takes the escaping encoder's
    # faster path, and every value must still give the text (and hash) earlier versions stored.
    assert _canonical(value) == json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def test_stored_text_of_non_ascii_and_escapes_is_written_as_they_are() -> None:
    for text in ("é", "\x7f", "\u2028", "😀", "a\\u00e9", "\x01", "plain"):
        assert _canonical({"q": text}) == json.dumps({"q": text}, ensure_ascii=False, separators=(",", ":"))


def _big_turns(store: SQLiteStore, count: int) -> None:
    """``count`` turns of 0.5 MB each (a gateway's 100,000-token questions)."""
    for n in range(count):
        store.append_turn("a", Turn(index=n + 1, question=f"{n} " + "lorem ipsum " * 44_000, answer="a"), [])


def test_with_background_checkpoints_a_commit_never_copies_the_log_into_the_file(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", background_checkpoints=True)
    store.create(SessionMeta(name="a", policy="legal-review", model="gpt-4o", base={}))
    assert store._checkpoints is not None
    store._checkpoints.close()  # no thread checkpoints: only a commit could
    _big_turns(store, 10)  # 5 MB: SQLite's automatic checkpoint would have run at 4 MB
    assert (tmp_path / "s.db").stat().st_size < 1_000_000
    assert (tmp_path / "s.db-wal").stat().st_size > 4_000_000
    store._checkpoints = None
    store.close()
    assert [t.index for t in SQLiteStore(tmp_path / "s.db").turns("a")] == list(range(1, 11))


def test_background_checkpoints_copy_the_log_into_the_file_once_enough_was_written(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", background_checkpoints=True)
    store.create(SessionMeta(name="a", policy="legal-review", model="gpt-4o", base={}))
    _big_turns(store, 10)
    checkpoints = store._checkpoints
    assert checkpoints is not None
    deadline = time.monotonic() + 30
    while checkpoints.done == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert checkpoints.done >= 1 and (tmp_path / "s.db").stat().st_size > 4_000_000
    store.close()
    assert not (tmp_path / "s.db-wal").exists()  # the last connection closed with its own checkpoint
    assert len(SQLiteStore(tmp_path / "s.db").turns("a")) == 10


def test_a_store_without_background_checkpoints_checkpoints_as_sqlite_does(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store._checkpoints is None
    _big_turns(store, 10)
    assert (tmp_path / "s.db").stat().st_size > 4_000_000  # the commit that crossed 4 MB copied the log


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"mode": "bogus"}, "a store's mode is"),
        ({"busy_timeout_seconds": float("nan")}, "busy_timeout_seconds is a finite number"),
        ({"busy_timeout_seconds": -1}, "busy_timeout_seconds is a finite number"),
    ],
)
def test_store_options_are_checked_before_the_file_is_looked_at(
    tmp_path: Path, options: dict, said: str
) -> None:
    from ctxbudget import connect_store

    with pytest.raises(ConfigError, match=said):
        connect_store(tmp_path / "s.db", **options)
    with pytest.raises(ConfigError, match="got an empty one"):
        connect_store("")
    with pytest.raises(ConfigError, match="got an empty one"):
        SQLiteStore("")
    assert not (tmp_path / "s.db").exists()
