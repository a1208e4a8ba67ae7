"""The SQLite store under concurrency and damage: every failure of the file is one StoreError
naming it (exit 2 and one line on the command line), racing openers and writers all succeed."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxbudget import ConfigError, StoreError
from ctxbudget.cli import main
from ctxbudget.session import SessionMeta, SQLiteStore, Turn

SRC = str(Path(__file__).resolve().parent.parent / "src")
META = SessionMeta(name="a", policy="legal-review", model="gpt-4o", base={"items": []})


def _store(path: Path, **options: object) -> SQLiteStore:
    store = SQLiteStore(path, **options)  # type: ignore[arg-type]
    store.create(META)
    return store


def _filled(path: Path, turns: int = 60) -> Path:
    """A closed store of several pages (each turn's text is distinct content)."""
    store = _store(path)
    for i in range(1, turns + 1):
        store.append_turn("a", Turn(index=i, question=f"{i} " + "q" * 2000), [{"turn": i}])
    store.close()
    return path


def _cli(*args: str) -> tuple[int, str]:
    """Exit code and stderr of a command."""
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stderr


def _racers(script: str, *args: str, processes: int = 8, timeout: float = 60) -> list[str]:
    """Run ``script`` in ``processes`` Python processes at once (argv: index, then ``args``) and
    return what each printed; every one must exit 0."""
    env = {**os.environ, "PYTHONPATH": SRC}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(k), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(processes)
    ]
    outputs = [child.communicate(timeout=timeout) for child in children]
    failed = [err or out for (out, err), child in zip(outputs, children, strict=True) if child.returncode]
    assert not failed, failed[0]
    return [out for out, _ in outputs]


OPENER = """
import sys, time
from ctxbudget.session import SQLiteStore, SessionMeta
k, folder, rounds, start = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
failures = []
for r in range(rounds):
    time.sleep(max(0.0, start + r * 0.06 - time.time()))  # every process opens round r's new file at once
    try:
        store = SQLiteStore(f"{folder}/race-{r}.db")
        store.create(SessionMeta(name=f"p{k}", policy="legal-review", model="gpt-4o", base={}))
        store.close()
    except Exception as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
print(len(failures), failures[:1])
"""


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    rounds = 25
    outputs = _racers(OPENER, str(tmp_path), str(rounds), str(time.time() + 1.5))
    assert [out.split()[0] for out in outputs] == ["0"] * 8, outputs
    for r in range(rounds):
        store = SQLiteStore(tmp_path / f"race-{r}.db", mode="read")
        assert store.names() == [f"p{k}" for k in range(8)] and store.schema_version() == 2


def test_opening_again_migrates_nothing(tmp_path: Path) -> None:
    _store(tmp_path / "s.db").close()
    again = SQLiteStore(tmp_path / "s.db")
    assert again.schema_version() == 2 and again.names() == ["a"]
    assert again._db.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == 2


def test_a_lock_held_elsewhere_ends_in_one_error_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = _store(path, busy_timeout_seconds=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(
        StoreError, match=r"is locked by another process \(gave up after 0.2 s: database is locked\)"
    ):
        store.append_turn("a", Turn(index=1, question="q"), [])
    assert SQLiteStore(path, busy_timeout_seconds=0.2).names() == ["a"]  # a current store opens unlocked
    assert time.monotonic() - started < 2
    holder.execute("ROLLBACK")
    assert store.append_turn("a", Turn(index=1, question="q"), []).index == 1  # the lock is gone: it works


def test_reads_answer_while_a_commit_waits_for_another_process_lock(tmp_path: Path) -> None:
    # The gateway reads a session's turn count for each request while its writer thread commits
    # answered turns: a commit waiting for a lock held elsewhere must not hold the reads up.
    import threading

    path = tmp_path / "s.db"
    store = _store(path, busy_timeout_seconds=30)
    store.append_turn("a", Turn(index=1, question="q1"), [])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    writer = threading.Thread(target=store.append_turn, args=("a", Turn(index=2, question="q2"), []))
    writer.start()
    try:
        time.sleep(0.3)  # the writer is in its busy wait
        assert writer.is_alive()
        assert store.count_turns("a") == 1 and store.last_turn("a") == Turn(index=1, question="q1")
        assert store.names() == ["a"] and store.meta("a") == META and len(store.turns("a")) == 1
        assert writer.is_alive()  # answered while the commit still waits
    finally:
        holder.execute("ROLLBACK")
        writer.join(timeout=30)
    assert store.count_turns("a") == 2  # the commit went through once the lock was gone


def test_a_new_store_is_created_under_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    path.touch()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match=f"session store '{path}' is locked by another process"):
        SQLiteStore(path, busy_timeout_seconds=0.2)
    holder.execute("ROLLBACK")
    assert SQLiteStore(path).schema_version() == 2


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def _truncated(path: Path) -> None:
    _filled(path)
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
    db.close()


def _foreign_migrations(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_migrations (id TEXT, applied TEXT)")
    db.close()


def _newer(path: Path) -> None:
    _store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_migrations (version) VALUES (3)")
    db.close()


def _damaged(path: Path) -> None:
    """A store of many pages with one page in the middle overwritten."""
    _filled(path)
    size = path.stat().st_size
    assert size > 40 * 4096
    with path.open("r+b") as f:
        f.seek((size // 4096 // 2) * 4096)
        f.write(b"\xff" * 4096)


BAD_FILES = [
    (_garbage, r"is not an SQLite database \(file is not a database\); check the path"),
    (_truncated, r"is damaged \(database disk image is malformed\); restore it from a backup"),
    (_foreign, r"is an SQLite database but not a ctxbudget session store \(its tables: users\)"),
    (_foreign_migrations, r"is an SQLite database but not a ctxbudget .* \(its tables: schema_migrations\)"),
    (_newer, r"has schema version 3, newer than this ctxbudget knows \(2\); upgrade ctxbudget"),
    (
        _damaged,
        # what is wrong, not quick_check's header line ("*** in database main ***")
        r"is damaged \((database disk image is malformed|quick_check: (?!\*\*\*).*)\); restore it from a backup",
    ),
]


@pytest.mark.parametrize(("spoil", "message"), BAD_FILES, ids=lambda v: getattr(v, "__name__", "")[1:])
@pytest.mark.parametrize("mode", ["create", "write", "read"])
def test_a_file_that_cannot_be_a_store_is_one_error_naming_it(
    tmp_path: Path, spoil: object, message: str, mode: str
) -> None:
    path = tmp_path / "bad.db"
    spoil(path)  # type: ignore[operator]
    before = path.read_bytes()
    with pytest.raises(StoreError, match=f"^session store {re.escape(repr(str(path)))} {message}"):
        SQLiteStore(path, mode=mode)  # type: ignore[arg-type]
    assert path.read_bytes() == before  # refused, not repaired or migrated


@pytest.mark.parametrize(("spoil", "message"), BAD_FILES, ids=lambda v: getattr(v, "__name__", "")[1:])
def test_the_cli_tells_a_bad_store_in_one_line_with_exit_2(
    tmp_path: Path, spoil: object, message: str
) -> None:
    path = tmp_path / "bad.db"
    spoil(path)  # type: ignore[operator]
    base = tmp_path / "base.json"
    base.write_text('{"items": []}')
    for args in (
        ["session", "list"],
        ["session", "show", "a"],
        ["session", "add", "a", "--question", "q"],
        ["session", "new", "b", "--base", str(base), "--model", "gpt-4o"],
    ):
        code, err = _cli(*args, "--store", str(path))
        assert code == 2 and err.count("\n") == 1, (args, err)
        assert err.startswith(f"ctxbudget: session store '{path}' ") and "Traceback" not in err


def test_the_gateway_reports_a_bad_store_at_start_up_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    _garbage(path)
    code, err = _cli("serve", "--store", str(path), "--port", "1")
    assert code == 2 and err == f"ctxbudget: session store '{path}' is not an SQLite database " + (
        "(file is not a database); check the path, or move the file aside to start a new store\n"
    )


def test_a_full_disk_names_the_cause_and_leaves_no_half_turn(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.db")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # the database is full: SQLITE_FULL
    with pytest.raises(StoreError, match=r"cannot be written \(database or disk is full\); free space"):
        store.append_turn("a", Turn(index=1, question="x" * 100_000), [{"turn": 1}])
    assert store.turns("a") == [] and store.ledger("a") == []
    store._db.execute("PRAGMA max_page_count = 1000000")  # space again: the same turn goes in
    assert store.append_turn("a", Turn(index=1, question="x" * 100_000), [{"turn": 1}]).index == 1


def test_a_read_only_store_is_one_error_naming_it(tmp_path: Path) -> None:
    path = _filled(tmp_path / "s.db", turns=2)
    reader = SQLiteStore(path, mode="read")
    assert [t.index for t in reader.turns("a")] == [1, 2]
    with pytest.raises(
        StoreError,
        match=r"is read-only \(attempt to write a readonly database\); make the file, its -wal and -shm "
        "files and its folder writable",
    ):
        reader.append_turn("a", Turn(index=3, question="q"), [])
    writer = SQLiteStore(path)
    writer._db.execute("PRAGMA query_only = ON")  # what a file without write permission answers
    with pytest.raises(StoreError, match=f"^session store '{path}' is read-only"):
        writer.create(SessionMeta(name="b", policy="legal-review", model="gpt-4o", base={}))


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes read-only files")
def test_a_file_without_write_permission_is_read_only(tmp_path: Path) -> None:
    path = _filled(tmp_path / "s.db", turns=2)
    path.chmod(0o444)
    code, err = _cli("session", "add", "a", "--question", "q", "--store", str(path))
    assert code == 2 and "is read-only" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "command", [["list"], ["show", "x"], ["export", "x"], ["add", "x", "--question", "q"]]
)
def test_commands_on_a_missing_store_never_create_it(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "none.db"
    code, err = _cli("session", *command, "--store", str(path))
    assert code == 2 and err == (
        f"ctxbudget: session store '{path}' does not exist; check the path (a store is created with its first session)\n"
    )
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteStore(path, mode="read")
    assert not path.exists()


def test_an_empty_file_is_no_store_to_read_but_becomes_one_when_written(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(StoreError, match="is empty"):
        SQLiteStore(path, mode="read")
    assert SQLiteStore(path, mode="write").schema_version() == 2


ADDER = """
import json, sys, time
from ctxbudget.cli import main
k, store, turns, start = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
time.sleep(max(0.0, start - time.time()))
for i in range(turns):
    try:
        main(["session", "add", "s", "--question", f"p{k} t{i}", "--store", store, "--json"])
    except SystemExit as exc:
        if exc.code:
            sys.exit(f"p{k} t{i}: exit {exc.code}")
"""


def test_processes_adding_turns_to_one_session_store_every_turn_in_order(tmp_path: Path) -> None:
    base, store = tmp_path / "base.json", tmp_path / "s.db"
    base.write_text(
        json.dumps({"items": [{"id": "p", "tier": "pinned", "kind": "playbook", "text": "Answer briefly."}]})
    )
    assert (
        _cli("session", "new", "s", "--base", str(base), "--model", "gpt-4o", "--store", str(store))[0] == 0
    )
    _racers(ADDER, str(store), "5", str(time.time() + 1.5))
    turns = SQLiteStore(store, mode="read").turns("s")
    assert [t.index for t in turns] == list(range(1, 41))
    for k in range(8):  # each process's turns, in the order it added them
        assert [t.question for t in turns if t.question.startswith(f"p{k} ")] == [
            f"p{k} t{i}" for i in range(5)
        ]
    for turn in turns:  # each was assembled on every turn stored before it: its request holds them
        ids = [item["id"] for tier in turn.report["tiers"] for item in tier["items"]]
        assert sorted(int(i.split("-")[1]) for i in ids if i.startswith("turn-")) == list(
            range(1, turn.index)
        )


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_store_file_removed_or_replaced_while_open_refuses_writes(tmp_path: Path, how: str) -> None:
    path = tmp_path / "s.db"
    store = _store(path)
    store.append_turn("a", Turn(index=1, question="kept"), [])
    for name in os.listdir(tmp_path):  # an operator moving the store aside
        os.rename(tmp_path / name, tmp_path / f"aside-{name}")
    if how == "replaced":
        _store(path).close()  # another store now at the path
    with pytest.raises(StoreError, match="was removed or replaced while it was open"):
        store.append_turn("a", Turn(index=2, question="would be lost"), [])
    with pytest.raises(StoreError, match="was removed or replaced"):
        store.ping()
    kept = SQLiteStore(tmp_path / "aside-s.db", mode="read")
    assert [t.question for t in kept.turns("a")] == ["kept"]


def test_a_record_damaged_inside_is_found_by_its_hash(tmp_path: Path) -> None:
    # One flipped byte inside a stored turn leaves SQLite's pages whole (quick_check passes): the
    # read decoded it and every command ended in a traceback.
    path = _filled(tmp_path / "s.db", turns=3)
    with sqlite3.connect(path) as db:
        sha, body = db.execute("SELECT sha256, body FROM content ORDER BY length(body) DESC").fetchone()
        db.execute("UPDATE content SET body = ? WHERE sha256 = ?", (body.replace('"', "'", 1), sha))
    db.close()
    code, error = _cli("session", "show", "a", "--store", str(path))
    assert code == 2 and "is damaged (stored content" in error and "does not match its hash" in error


def test_a_record_damaged_into_bytes_that_are_not_utf8_is_damage_not_quoted(tmp_path: Path) -> None:
    # A damaged byte that leaves the text not UTF-8 fails in Python's decoding before the hash is
    # checked: "failed (Could not decode to UTF-8 column 'body' with text '<the turn>'); check the
    # file" quoted the client's text and gave no way out.
    path = _filled(tmp_path / "s.db", turns=3)
    with sqlite3.connect(path) as db:
        sha, body = db.execute("SELECT sha256, body FROM content ORDER BY length(body) DESC").fetchone()
        damaged = body.encode("utf-8")[:40] + b"\xff\xfe" + body.encode("utf-8")[42:]
        db.execute("UPDATE content SET body = CAST(? AS TEXT) WHERE sha256 = ?", (damaged, sha))
    db.close()
    for command in ("show", "export"):
        code, error = _cli("session", command, "a", "--store", str(path))
        assert code == 2 and "is damaged (a stored body is not UTF-8 text)" in error, error
        assert "sqlite3 FILE .recover" in error and "qqqq" not in error
    with pytest.raises(StoreError, match="is damaged"):
        SQLiteStore(path, mode="read").turns("a")


def test_a_damaged_schema_whose_error_quotes_bytes_that_are_not_utf8_is_damage(tmp_path: Path) -> None:
    # SQLite's "malformed database schema (ledger) - near "<damaged text>"" quoted bytes Python
    # could not decode: every command ended in a UnicodeDecodeError traceback (exit 1)
    path = _filled(tmp_path / "s.db", turns=1)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA writable_schema=ON")
        damaged = b"CREATE TABX\xc2E ledger (x)"
        db.execute("UPDATE sqlite_master SET sql = CAST(? AS TEXT) WHERE name = 'ledger'", (damaged,))
    db.close()
    for command in (["list"], ["show", "a"], ["add", "a", "--question", "q"]):
        code, error = _cli("session", *command, "--store", str(path))
        assert code == 2 and "is damaged (SQLite's error about it quotes text that is not UTF-8)" in error, (
            error
        )
    with pytest.raises(StoreError, match="is damaged"):
        SQLiteStore(path, mode="read")


def test_an_unknown_session_among_many_names_the_closest_not_all(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "many.db")
    for k in range(40):
        store.create(SessionMeta(name=f"matter-{k:03d}", policy="legal-review", model="gpt-4o", base={}))
    with pytest.raises(ConfigError) as unknown:
        store.meta("matter-0077")
    message = str(unknown.value)
    assert "(40 sessions; closest: matter-007" in message and "matter-039" not in message
    store.close()
    few = SQLiteStore(tmp_path / "few.db")
    few.create(META)
    with pytest.raises(ConfigError, match=r"no session 'b' in .*; sessions: a$"):
        few.meta("b")


def test_a_full_disk_told_as_a_shared_memory_error_says_so() -> None:
    # SQLite answers a full disk while growing the WAL's -shm file with "disk I/O error".
    from ctxbudget.session._sqlite_file import store_error

    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = sqlite3.SQLITE_IOERR_SHMSIZE  # type: ignore[attr-defined]
    message = str(store_error("s.db", error, 30))
    assert "cannot be written (disk I/O error: no room to grow its -shm file; is its disk full?)" in message
    assert "free space on its disk" in message


def test_a_store_in_a_folder_that_cannot_be_written_is_read_immutable_when_no_log_holds_data() -> None:
    # SQLite reading a WAL store creates its -shm index next to it: a read-only folder (a backup
    # on read-only media, a volume mounted :ro) could not be listed.
    from ctxbudget.session._sqlite_file import read_uri

    file = Path("/backups/s.db")
    assert read_uri(file, folder_writable=False, wal_bytes=0).endswith("?mode=ro&immutable=1")
    assert read_uri(file, folder_writable=False, wal_bytes=4096).endswith("?mode=ro")  # a writer's log
    assert read_uri(file, folder_writable=True, wal_bytes=0).endswith("?mode=ro")


def test_secrets_of_one_length_are_scrubbed_in_one_order_whatever_the_hash_seed() -> None:
    """Overlapping secrets of equal length scrubbed in a set's order made the shown error depend
    on PYTHONHASHSEED ('a***.invalid' or '***a.invalid')."""
    program = (
        "from ctxbudget.session._postgres_database import redacted\n"
        "print(redacted('postgresql://u:abab@ababa.invalid/db?password=baba')[2])\n"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(6)
    }
    assert seen == {"['abab', 'baba']\n"}


def _commit_waiting(store: SQLiteStore, path: Path, index: int) -> tuple[sqlite3.Connection, Any]:
    """Another process's write lock on ``path`` and a thread whose commit waits for it."""
    import threading

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    writer = threading.Thread(target=store.append_turn, args=("a", Turn(index=index, question="q"), []))
    writer.start()
    time.sleep(0.3)
    assert writer.is_alive()
    return holder, writer


def test_a_read_while_a_commit_waits_follows_the_store_not_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    store = _store(Path("s.db"), busy_timeout_seconds=30)  # a relative path
    store.append_turn("a", Turn(index=1, question="q"), [])
    monkeypatch.chdir(tmp_path / "b")
    holder, writer = _commit_waiting(store, tmp_path / "a" / "s.db", 2)
    try:
        assert store.count_turns("a") == 1  # the store's file, read on the second connection
        assert not (tmp_path / "b" / "s.db").exists()  # nothing made in the working folder
    finally:
        holder.execute("ROLLBACK")
        writer.join(timeout=30)


def test_a_read_while_a_commit_waits_never_makes_a_file_where_the_store_was(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = _store(path, busy_timeout_seconds=30)
    store.append_turn("a", Turn(index=1, question="q"), [])
    holder, writer = _commit_waiting(store, path, 2)
    try:
        path.rename(tmp_path / "moved.db")  # moved aside while open (its -wal stays beside the path)
        with pytest.raises(StoreError, match="removed or replaced"):
            store.count_turns("a")
        assert not path.exists()  # no empty database made in its place (which deletes the -wal)
    finally:
        (tmp_path / "moved.db").rename(path)
        holder.execute("ROLLBACK")
        writer.join(timeout=30)
    assert SQLiteStore(path).count_turns("a") == 2  # nothing lost


def test_ping_write_tells_a_lock_held_elsewhere_which_a_read_does_not(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = _store(path, busy_timeout_seconds=30)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store.ping()  # a read answers under WAL
        with pytest.raises(StoreError, match="locked by another process"):
            store.ping_write()
    finally:
        holder.execute("ROLLBACK")
    store.ping_write()
    assert store.append_turn("a", Turn(index=1, question="q"), []).index == 1  # its timeout is back


def test_ping_write_tells_a_disk_without_room_for_a_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taking the lock writes nothing: after a commit failed on a full disk the check passed, and
    every other request was sent upstream (billed) for its commit to fail and its answer to be
    withheld. The disk (the operating system's figure) is what is faked here."""
    import shutil

    path = tmp_path / "s.db"
    store = _store(path)
    store.append_turn("a", Turn(index=1, question="q" * 300_000), [])  # the largest turn: ~300 kB
    real = shutil.disk_usage(tmp_path)

    def disk_with(free: int) -> Any:
        return lambda _folder: type(real)(real.total, real.total - free, free)

    monkeypatch.setattr(shutil, "disk_usage", disk_with(400_000))  # room for one such turn, not two
    with pytest.raises(StoreError, match="400,000 bytes free on its disk"):
        store.ping_write()
    store.ping()  # a read needs no room
    monkeypatch.setattr(shutil, "disk_usage", disk_with(4_000_000))
    store.ping_write()


@pytest.mark.parametrize(
    "name",
    [
        "\u2764\ufe0f\u200d\U0001f525",  # heart on fire: a selector before the joiner
        "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
        "\U0001f3f3\ufe0f\u200d\u26a7\ufe0f",  # transgender flag
        "\U0001f575\ufe0f\u200d\u2642\ufe0f",  # man detective
        "\U0001f469\U0001f3fd\u200d\U0001f4bb",  # woman technologist, a skin tone before the joiner
        "\U0001f43b\u200d\u2744\ufe0f",  # polar bear
        "\u0915\u094d\u200d\u0937",  # a joiner after a Devanagari virama
        "\u0915\u094d\u200c\u0937",  # a non-joiner there too
        "\u0628\u064e\u200c\u0628",  # a non-joiner between Arabic letters, past a vowel mark
        "\u00a9\ufe0f matter",  # an emoji presentation of a symbol
        "#\ufe0f\u20e3 matter",  # a keycap
        "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland
    ],
)
def test_a_name_keeps_the_ignorable_characters_its_emoji_and_scripts_need(name: str) -> None:
    from ctxbudget.session.store import name_problem

    assert name_problem(name) is None


@pytest.mark.parametrize(
    "name",
    [
        "\u4e2d\u200d\u6587",  # a joiner between Chinese characters prints as nothing
        "\u4e2d\u200c\u6587",
        "\ud55c\u200d\uad6d",  # Korean
        "\u05e9\u05dc\u200d\u05d5\u05dd",  # Hebrew does not join
        "\uff21\u200d\uff22",  # fullwidth Latin
        "a\u00d7\u200d\u00d7b",
        "\U0001f600\u200d\u4e2d",  # an emoji, then a character that is not one
        "\U0001f600\u200c\U0001f600",  # a non-joiner between emoji
        "caf\u00e9\ufe0f",  # a selector after a letter
        "\u4e2d\ufe0e\u6587",
        "\u0434\ufe0f",
        "\U0001f3f4\U000e0041",  # tags after the black flag that are no subdivision's
        "\U0001f3f4\U000e007f",  # the cancel tag alone
        "matter-\U0001f3f4\U000e0068\U000e0069",  # "hi" hidden after a flag
        "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f\U000e0041",  # more after England's
    ],
)
def test_a_name_with_a_joiner_selector_or_tag_that_prints_nothing_is_refused(name: str) -> None:
    """Each prints as the name without it: `session list` showed two sessions as one name."""
    from ctxbudget.session.store import name_problem

    assert "invisible character" in str(name_problem(name))


def test_the_name_checks_character_classes_are_unicodes_own_sets_at_every_code_point() -> None:
    """The scans :func:`name_problem` runs (one regex each) refuse exactly the code points of
    the sets they stand for: the default-ignorable ranges, and the categories Cc, Zl and Zp."""
    import sys
    import unicodedata

    from ctxbudget.session.store import _BREAKING_CHARS, _IGNORABLE, _IGNORABLE_CHARS, name_problem

    every = "".join(map(chr, range(sys.maxunicode + 1)))  # a character's index is its code point
    ignorable = {point for low, high in _IGNORABLE for point in range(low, high + 1)}
    assert {found.start() for found in _IGNORABLE_CHARS.finditer(every)} == ignorable
    breaking = {point for point, char in enumerate(every) if unicodedata.category(char) in ("Cc", "Zl", "Zp")}
    assert {found.start() for found in _BREAKING_CHARS.finditer(every)} == breaking
    for breaking in ("\x00", "\t", "\n", "\x7f", "\x85", "\x9f", "\u2028", "\u2029"):
        assert name_problem(f"matter{breaking}42") == "holds a control character or a line break"
    assert name_problem("matter\xa042") is None  # a no-break space inside a name is the name's


def test_a_session_name_that_is_not_utf8_is_refused_not_a_traceback(tmp_path: Path) -> None:
    from ctxbudget.session.store import name_problem

    assert name_problem("bad\udcff") == "is not valid UTF-8 text"
    # printed, "matter-\u202e24" reads "matter-42": in a log line, a terminal, `session list`
    for control in ("\u202e", "\u2066", "\u200f"):
        assert "bidirectional control" in str(name_problem(f"matter-{control}24"))
    # zero-width space, soft hyphen, BOM, word joiner; joiners, selectors, a tag, fillers, a Khmer
    # inherent vowel, a Mongolian selector, after ASCII; a tag away from its flag
    for invisible in (
        "\u200b", "\u00ad", "\ufeff", "\u2060", "\u200d", "\u200c", "\ufe0f", "\U000e0100",
        "\U000e0041", "\u3164", "\u034f", "\u17b4", "\u180b", "\ufff0",
    ):  # fmt: skip
        assert "invisible character" in str(name_problem(f"matter-4{invisible}2")), repr(invisible)
    assert "invisible character" in str(name_problem("🏴 matter-4\U000e00412"))
    assert "invisible character" in str(name_problem("akte-é\u200dé"))  # a joiner between letters
    assert "composed form (NFC)" in str(name_problem("cafe\u0301"))  # prints as "café"
    assert name_problem("café") is None and name_problem("1\ufe0f\u20e3 matter") is None  # a keycap
    assert name_problem("❤\ufe0f matter") is None  # an emoji's presentation selector
    assert name_problem("matter-42") is None and name_problem("👨\u200d👩\u200d👧 family") is None
    assert name_problem("می\u200cخواهم") is None  # a Persian word's non-joiner
    assert (
        name_problem("🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f") is None
    )  # England's flag
    base = tmp_path / "base.json"
    base.write_text('{"items": []}')
    result = CliRunner().invoke(
        main,
        [
            "session",
            "new",
            "bad\udcff",
            "--base",
            str(base),
            "--model",
            "gpt-4o",
            "--store",
            str(tmp_path / "s.db"),
        ],
    )
    assert result.exit_code == 2 and "UTF-8" in result.output, result.output


@pytest.mark.parametrize("command", [["show"], ["export"], ["add", "--question", "q"]])
def test_a_session_looked_up_by_a_name_that_is_not_utf8_is_one_line_not_a_traceback(
    tmp_path: Path, command: list[str]
) -> None:
    # `session new` refused such a name; the commands that look one up ended in a
    # UnicodeEncodeError traceback (exit 1) when the store encoded it for the query.
    path = _filled(tmp_path / "s.db", turns=1)
    verb, *rest = command
    result = CliRunner().invoke(main, ["session", verb, "bad\udcff", *rest, "--store", str(path)])
    assert result.exit_code == 2 and "is not UTF-8 text" in result.stderr, result.output
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("password", ["e", "valid"])
def test_a_short_password_is_not_starred_inside_the_words_of_an_error(password: str) -> None:
    """A password masked wherever its letters appeared turned libpq's "invalid URI query
    parameter" into "qu***ry param***t***r" (password "e") or "in*** URI" (password "valid"):
    the message garbled, and the places starred gave the password away."""
    pytest.importorskip("psycopg")
    from ctxbudget import connect_store

    with pytest.raises(StoreError) as caught:
        connect_store(f"postgresql://u:{password}@localhost:5432/db?bogus=1")
    assert 'invalid URI query parameter: "bogus"' in str(caught.value)
    assert "***" not in str(caught.value)


def test_a_password_standing_alone_in_an_error_is_masked() -> None:
    from ctxbudget.session._postgres_database import store_error

    class Refused(Exception):
        pass

    shown = str(
        store_error("store", Refused('FATAL: password "hunter2" and "hunter2x" seen'), ["hunter2"], 1.0)
    )
    assert 'password "***" and "hunter2x"' in shown
    long_secret = str(store_error("store", Refused("saw xcorrecthorsebattery"), ["correcthorse"], 1.0))
    assert "correcthorse" not in long_secret


@pytest.mark.parametrize(
    "url", ["postgresql://u:pw@localhost:5432/db?sslmode=bogus", "postgresql://u:pw@localhost:99999/db"]
)
def test_a_url_value_libpq_cannot_use_is_a_bad_url_not_an_unreachable_server(url: str) -> None:
    """An sslmode libpq does not know, or a port out of range, was told "cannot be reached ...
    check that the server is running", and counted as an outage to wait out."""
    pytest.importorskip("psycopg")
    from ctxbudget import StoreUnavailable, connect_store

    with pytest.raises(StoreError) as caught:
        connect_store(url)
    assert not isinstance(caught.value, StoreUnavailable)
    assert "is not a valid PostgreSQL URL" in str(caught.value)


def test_adding_a_turn_to_an_empty_file_writes_nothing_to_it(tmp_path: Path) -> None:
    """`session add` on a zero-byte file failed ("no session") but left the schema in it (49 kB),
    and `session list` then printed nothing instead of saying the store is empty."""
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    result = CliRunner().invoke(main, ["session", "add", "m1", "--question", "hi", "--store", str(path)])
    assert result.exit_code == 2 and "is empty" in result.output
    assert path.stat().st_size == 0


@pytest.mark.parametrize("name", [" matter-42", "matter-42 ", "matter-42\u00a0", "\u3000matter"])
def test_a_session_name_that_begins_or_ends_with_a_blank_is_refused(name: str) -> None:
    """It printed as the name without the blank, and the gateway could never name it: an HTTP
    header's value loses its leading and trailing blanks."""
    from ctxbudget.errors import ConfigError
    from ctxbudget.session import Session

    with pytest.raises(ConfigError, match="begins or ends with a blank"):
        Session.checked_meta(name, policy="legal-review", model="claude-sonnet-4-5", base={"items": []})
    assert Session.checked_meta(
        "matter 42", policy="legal-review", model="claude-sonnet-4-5", base={"items": []}
    )
