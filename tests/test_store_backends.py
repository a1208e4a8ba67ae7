"""The SessionStore protocol's behaviour, the same on both stores: an SQLite file and a
PostgreSQL database (on a server the tests start; see tests/postgres_server.py)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget import ConfigError, StoreError, StoreUnavailable
from ctxbudget.cli import main
from ctxbudget.session import Session, SessionMeta, SessionStore, Turn, connect_store
from ctxbudget.session._sqlite_file import MIGRATIONS

META = SessionMeta(name="a", policy="legal-review", model="gpt-4o", base={"items": [{"id": "x"}]})


@pytest.fixture()
def store(store_target: str) -> SessionStore:
    made = connect_store(store_target)
    made.create(META)
    return made


def test_create_meta_names_and_a_duplicate(store: SessionStore) -> None:
    given = SessionMeta(name="B", policy="p", model="m", base={"items": [{"id": "y", "tags": ("t",)}]})
    stored = store.create(given)  # the metadata as stored: what meta reads back, a copy of the base
    assert stored == store.meta("B") and stored.base == {"items": [{"id": "y", "tags": ["t"]}]}
    assert stored.base["items"] is not given.base["items"]
    assert store.meta("a") == META and store.names() == ["B", "a"]
    with pytest.raises(ConfigError, match="session 'a' already exists in"):
        store.create(META)
    with pytest.raises(ConfigError, match=r"no session 'zzz' in .*; sessions: B, a"):
        store.meta("zzz")
    assert store.policy_of("a") == "legal-review" and store.policy_of("B") == "p"
    assert store.policy_of("zzz") is None  # read alone: no list of the known names
    assert store.schema_version() == 2


def test_turns_ledger_last_turn_and_counts(store: SessionStore) -> None:
    assert store.last_turn("a") is None and store.count_turns("a") == 0
    first = Turn(index=1, question="q1", answer="a1", tags=("Notice",))
    assert store.append_turn("a", first, [{"turn": 1}, {"turn": 1, "n": 2}]) == first
    store.append_turn("a", Turn(index=2, question="q2"), [{"turn": 2}])
    assert [t.question for t in store.turns("a")] == ["q1", "q2"] and store.turns("a")[0] == first
    assert store.ledger("a") == [{"turn": 1}, {"n": 2, "turn": 1}, {"turn": 2}]
    last = store.last_turn("a")
    assert last is not None and last.index == 2 and store.count_turns("a") == 2
    assert store.last_turn("nope") is None and store.turns("nope") == [] and store.ledger("nope") == []


def test_a_wrong_index_stores_nothing_and_next_index_numbers_the_turn(store: SessionStore) -> None:
    with pytest.raises(ConfigError, match="expects turn 1, got turn 3"):
        store.append_turn("a", Turn(index=3, question="q"), [{"turn": 3}])
    assert store.turns("a") == [] and store.ledger("a") == []
    stored = [store.append_turn("a", Turn(index=0, question=f"q{i}"), [], next_index=True) for i in range(3)]
    assert [t.index for t in stored] == [1, 2, 3] == [t.index for t in store.turns("a")]
    with pytest.raises(ConfigError, match=r"no session 'other' in .*; sessions: a$"):
        store.append_turn("other", Turn(index=1, question="q"), [])


def test_a_failure_inside_a_serialized_block_undoes_the_block(store: SessionStore, store_target: str) -> None:
    with pytest.raises(ConfigError, match="later"), store.serialized("a"):
        store.append_turn("a", Turn(index=1, question="q"), [{"turn": 1}])
        raise ConfigError("a failure later in the step")
    assert store.turns("a") == [] and store.ledger("a") == []
    with store.serialized("a"):
        with pytest.raises(ConfigError, match="expects turn 1"):
            store.append_turn("a", Turn(index=5, question="q"), [])
        assert store.count_turns("a") == 0
        store.append_turn("a", Turn(index=1, question="q"), [])  # the failed step alone was undone
    assert [t.index for t in store.turns("a")] == [1]
    assert [t.index for t in connect_store(store_target, mode="read").turns("a")] == [1]  # stored


def test_calibration_update_reads_applies_and_stores(store: SessionStore) -> None:
    seen: list[Mapping[str, Any] | None] = []

    def bump(state: Mapping[str, Any] | None) -> Mapping[str, Any]:
        seen.append(state)
        return {"n": (state or {}).get("n", 0) + 1, "ratio": 1.25, "names": ["é"]}

    assert store.calibration_states() == {}
    assert store.calibration_update("gpt-4o", bump) == {"n": 1, "ratio": 1.25, "names": ["é"]}
    assert store.calibration_update("gpt-4o", bump)["n"] == 2 and seen[0] is None and seen[1]["n"] == 1
    store.calibration_update("claude", lambda _: {"n": 9})
    assert store.calibration_states() == {
        "claude": {"n": 9},
        "gpt-4o": {"n": 2, "ratio": 1.25, "names": ["é"]},
    }
    with pytest.raises(ConfigError, match="not a mapping"):
        store.calibration_update("claude", lambda _: [1])  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigError, match="not JSON"):
        store.calibration_update("claude", lambda _: {"x": object()})
    with pytest.raises(ZeroDivisionError):
        store.calibration_update("claude", lambda _: {"x": 1 / 0})
    assert store.calibration_states()["claude"] == {"n": 9}  # a failed update stores nothing


def test_calibration_updates_from_several_stores_at_once_lose_none(store_target: str) -> None:
    stores = [connect_store(store_target) for _ in range(4)]

    def bump(state: Mapping[str, Any] | None) -> Mapping[str, Any]:
        time.sleep(0.001)  # widen the window between the read and the write
        return {"n": (state or {}).get("n", 0) + 1}

    def work(store: SessionStore) -> None:
        for _ in range(25):
            store.calibration_update("k", bump)

    threads = [threading.Thread(target=work, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stores[0].calibration_states() == {"k": {"n": 100}}
    for store in stores:
        store.close()


def test_ping_answers_and_a_closed_store_is_a_store_error(store_target: str) -> None:
    store = connect_store(store_target)
    store.ping()
    store.close()
    with pytest.raises(StoreError) as caught:
        store.ping()
    assert not isinstance(caught.value, StoreUnavailable)  # closed here, not unreachable


def test_read_mode_reads_and_writes_nothing(store: SessionStore, store_target: str) -> None:
    store.append_turn("a", Turn(index=1, question="q"), [{"turn": 1}])
    reader = connect_store(store_target, mode="read")
    assert reader.names() == ["a"] and [t.question for t in reader.turns("a")] == ["q"]
    with pytest.raises(StoreError, match="read-only"):
        reader.append_turn("a", Turn(index=2, question="q"), [])
    with pytest.raises(StoreError, match="read-only"):
        reader.calibration_update("k", lambda _: {})


def test_a_session_added_to_from_two_store_objects_sees_every_turn(store_target: str) -> None:
    base = {"items": [{"id": "p", "tier": "pinned", "kind": "playbook", "text": "Answer briefly."}]}
    Session.create(connect_store(store_target), "s", policy="legal-review", model="gpt-4o", base=base)
    for k in range(4):  # alternate replicas, each reopening the session as `session add` does
        Session(connect_store(store_target, mode="write"), "s").add(f"question {k}")
    turns = connect_store(store_target, mode="read").turns("s")
    assert [t.index for t in turns] == [1, 2, 3, 4]
    assert [t.question for t in turns] == [f"question {k}" for k in range(4)]


def test_the_session_commands_work_on_either_store(store_target: str, tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text('{"items": [{"id": "p", "tier": "pinned", "kind": "playbook", "text": "Be brief."}]}')
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(main, [*args, "--store", store_target])
        assert result.exit_code == 0, result.output + result.stderr
        return result.output

    assert run("session", "new", "m", "--base", str(base), "--model", "gpt-4o").startswith(
        "created session 'm' in"
    )
    run("session", "add", "m", "--question", "Was notice given?", "--json")
    assert run("session", "list").startswith("m\t1 turn\t")
    assert "turn 1:" in run("session", "show", "m")
    assert json.loads(run("session", "export", "m"))["turns"][0]["question"] == "Was notice given?"


def test_an_sqlite_store_of_version_1_is_read_as_it_is_and_migrated_by_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
        db.executescript(MIGRATIONS[0][1])
        db.execute("INSERT INTO schema_migrations VALUES (1)")
    db.close()
    reader = connect_store(path, mode="read")
    assert reader.schema_version() == 1 and reader.names() == [] and reader.calibration_states() == {}
    writer = connect_store(path, mode="write")
    assert writer.schema_version() == 2
    writer.calibration_update("k", lambda _: {"n": 1})
    assert connect_store(path, mode="read").calibration_states() == {"k": {"n": 1}}


def _execute(target: str, statement: str) -> None:
    """One statement run on the store's database directly, as damage would come to it."""
    if target.startswith("postgres"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(statement)
        return
    with sqlite3.connect(target) as db:
        db.execute(statement)
    db.close()


@pytest.mark.parametrize(
    ("table", "column", "what"), [("turns", "idx", "turn"), ("ledger", "seq", "ledger entry")]
)
def test_a_turn_or_ledger_entry_taken_out_is_damage(
    store_target: str, table: str, column: str, what: str
) -> None:
    """A store with one turn's row deleted listed the others as the session, and its next turn
    was refused as numbered wrong ("expects turn 31, got turn 30"), damage never named."""
    store = connect_store(store_target)
    store.create(META)
    for i in range(1, 4):
        store.append_turn("a", Turn(index=i, question=f"q{i}"), [{"turn": i}])
    store.close()
    _execute(store_target, f"DELETE FROM {table} WHERE session = 'a' AND {column} = 2")
    reopened = connect_store(store_target)
    with pytest.raises(StoreError, match=rf"is damaged \(session 'a' has no {what} 2\)"):
        reopened.turns("a") if table == "turns" else reopened.ledger("a")
    reopened.close()
    if table == "turns" and not store_target.startswith("postgres"):
        result = CliRunner().invoke(main, ["session", "show", "a", "--store", store_target])
        assert result.exit_code == 2 and "has no turn 2" in result.stderr
