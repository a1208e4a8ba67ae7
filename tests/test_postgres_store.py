"""The PostgreSQL store under concurrency and failure: processes writing one session, replicas
migrating one database at once, a newer schema, an unreachable or vanished server, read mode on an
empty database, and no password in any message."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from ctxbudget import StoreError, StoreUnavailable
from ctxbudget.cli import main
from ctxbudget.session import SessionMeta, Turn, connect_store
from ctxbudget.session.postgres import PostgresStore

from .postgres_server import PASSWORD, Forwarder, PostgresServer, free_port

SRC = str(Path(__file__).resolve().parent.parent / "src")
META = SessionMeta(name="s", policy="legal-review", model="gpt-4o", base={})


def _append(url: str, turns: int, worker: int, start: Any) -> None:
    """A process adding ``turns`` turns to session ``s``: even workers let the store number them,
    odd ones number them themselves under the session's lock."""
    store = connect_store(url, mode="write")
    start.wait()
    for i in range(turns):
        turn = Turn(index=0, question=f"w{worker} t{i}")
        if worker % 2 == 0:
            store.append_turn("s", turn, [{"w": worker, "i": i}], next_index=True)
            continue
        with store.serialized("s"):
            turn = Turn(index=store.count_turns("s") + 1, question=turn.question)
            store.append_turn("s", turn, [{"w": worker, "i": i}])
    store.close()


def _open_and_create(url: str, worker: int, start: Any) -> None:
    """A replica starting at once with the others on a fresh database."""
    start.wait()
    store = connect_store(url)
    store.create(SessionMeta(name=f"p{worker}", policy="legal-review", model="gpt-4o", base={}))
    store.close()


def _in_processes(target: Any, *args: Any, processes: int = 6) -> None:
    """``target(*args, worker, barrier)`` in ``processes`` spawned processes released at once;
    every one must exit 0."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(processes)
    children = [context.Process(target=target, args=(*args, k, start)) for k in range(processes)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
    assert [child.exitcode for child in children] == [0] * processes


def test_processes_appending_to_one_session_store_every_turn_once_in_order(postgres_url: str) -> None:
    connect_store(postgres_url).create(META)
    _in_processes(_append, postgres_url, 15)
    store = connect_store(postgres_url, mode="read")
    turns, ledger = store.turns("s"), store.ledger("s")
    assert [t.index for t in turns] == list(range(1, 91))
    assert sorted(t.question for t in turns) == sorted(f"w{w} t{i}" for w in range(6) for i in range(15))
    for w in range(6):  # each worker's turns, and its ledger entries, in the order it added them
        assert [t.question for t in turns if t.question.startswith(f"w{w} ")] == [
            f"w{w} t{i}" for i in range(15)
        ]
        assert [e["i"] for e in ledger if e["w"] == w] == list(range(15))


def test_replicas_opening_a_fresh_database_at_once_migrate_it_once(postgres_server: PostgresServer) -> None:
    for _ in range(3):
        url = postgres_server.database()
        _in_processes(_open_and_create, url, processes=8)
        store = connect_store(url, mode="read")
        assert store.schema_version() == 2 and store.names() == [f"p{k}" for k in range(8)]
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT version FROM ctxbudget.schema_migrations ORDER BY 1").fetchall() == [
                (1,),
                (2,),
            ]


def test_a_newer_schema_is_refused_in_every_mode(postgres_url: str) -> None:
    connect_store(postgres_url).close()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("INSERT INTO ctxbudget.schema_migrations (version) VALUES (3)")
    for mode in ("create", "write", "read"):
        with pytest.raises(StoreError, match=r"has schema version 3, newer than this ctxbudget knows \(2\)"):
            connect_store(postgres_url, mode=mode)  # type: ignore[arg-type]


def test_read_mode_on_an_empty_database_creates_nothing(postgres_url: str) -> None:
    with pytest.raises(StoreError, match="holds no ctxbudget session store") as caught:
        connect_store(postgres_url, mode="read")
    assert not isinstance(caught.value, StoreUnavailable)
    with psycopg.connect(postgres_url) as conn:
        found = conn.execute("SELECT COUNT(*) FROM pg_namespace WHERE nspname = 'ctxbudget'").fetchone()
        assert found == (0,)
    code = CliRunner().invoke(main, ["session", "list", "--store", postgres_url]).exit_code
    assert code == 2


def test_a_closed_port_is_unavailable_at_once(postgres_server: PostgresServer) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"cannot be reached .*Connection refused"):
        connect_store(postgres_server.url("postgres", port=free_port()))
    assert time.monotonic() - started < 2


def test_a_server_that_never_answers_is_unavailable_after_the_connect_timeout(
    postgres_server: PostgresServer,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts the connection, says nothing
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="cannot be reached"):
            PostgresStore(
                postgres_server.url("postgres", port=silent.getsockname()[1]), connect_timeout_seconds=1
            )
        assert time.monotonic() - started < 5


def test_a_server_gone_after_start_is_unavailable(postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    connect_store(url).create(META)
    forwarder = Forwarder(postgres_server.port)
    store = PostgresStore(
        postgres_server.url(url.rsplit("/", 1)[1], port=forwarder.port), connect_timeout_seconds=1
    )
    store.ping()
    forwarder.close()
    for action in (store.ping, lambda: store.append_turn("s", Turn(index=1, question="q"), [])):
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="cannot be reached") as caught:
            action()
        assert time.monotonic() - started < 5 and PASSWORD not in str(caught.value)
    store.close()
    assert connect_store(url, mode="read").turns("s") == []  # nothing half-written


class _Reopenable(Forwarder):
    """A forwarder that can listen again on its port after :meth:`close`, as a server back."""

    def reopen(self) -> None:
        """Listen on the same port again."""
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.open = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()


def test_a_server_back_after_an_outage_serves_again_at_the_next_ping(postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    connect_store(url).create(META)
    forwarder = _Reopenable(postgres_server.port)
    store = PostgresStore(postgres_server.url(url.rsplit("/", 1)[1], port=forwarder.port))
    store.ping()
    forwarder.close()
    outage_end = time.monotonic() + 8  # long enough for the pool's reconnection to back off
    while time.monotonic() < outage_end:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.ping()
        assert time.monotonic() - started < 2.5  # not the 5 s connect timeout: /healthz awaits it
    forwarder.reopen()
    back = time.monotonic()
    while True:
        try:
            store.ping()
            break
        except StoreUnavailable:
            assert time.monotonic() - back < 2, "the store still fails 2 s after the server is back"
    assert store.append_turn("s", Turn(index=1, question="q"), []).index == 1
    store.close()
    forwarder.close()


def test_ping_answers_while_every_pooled_connection_is_in_use(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_size=1)
    store.create(META)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.serialized("s"):
            store.append_turn("s", Turn(index=1, question="q"), [])
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    started = time.monotonic()
    store.ping()  # the server answers: a busy pool is no outage
    assert time.monotonic() - started < 2.5
    release.set()
    holder.join()
    assert [t.index for t in store.turns("s")] == [1]
    store.close()


def test_no_message_shows_the_password(postgres_server: PostgresServer, postgres_url: str) -> None:
    wrong = "wrong-Pw-7f3a"
    database = postgres_url.rsplit("/", 1)[1]
    failures = {
        "credentials": postgres_server.url(database, password=wrong),
        "missing database": postgres_server.url("no_such_db"),
        "closed port": postgres_server.url(database, port=free_port()),
        "empty database": postgres_url,
        "password in the query": f"postgresql://ctxbudget@127.0.0.1:{postgres_server.port}/nodb?password={wrong}",
    }
    for what, url in failures.items():
        with pytest.raises(StoreError) as caught:
            connect_store(url, mode="read")
        message = str(caught.value)
        assert PASSWORD not in message and wrong not in message, (what, message)
        assert caught.value.path.startswith("postgresql://ctxbudget@127.0.0.1:"), what
        result = CliRunner().invoke(main, ["session", "list", "--store", url])
        assert result.exit_code == 2 and PASSWORD not in result.stderr and wrong not in result.stderr
    assert "refused the credentials" in str(_error(failures["credentials"]))
    store = connect_store(postgres_url)
    assert PASSWORD not in store.location and store.location == postgres_url.replace(f":{PASSWORD}@", "@")


def _error(url: str) -> StoreError:
    with pytest.raises(StoreError) as caught:
        connect_store(url)
    return caught.value


def test_the_package_imports_without_psycopg_and_names_the_extra() -> None:
    script = """
import sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool"):
            raise ImportError(f"No module named {name!r}")
import ctxbudget, ctxbudget.session, ctxbudget.cli
sys.meta_path.insert(0, Missing())
assert "psycopg" not in sys.modules
try:
    ctxbudget.connect_store("postgresql://u:secret@127.0.0.1:1/db")
except ctxbudget.StoreError as exc:
    print(exc)
"""
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("session store 'postgresql://u@127.0.0.1:1/db' needs the PostgreSQL driver")
    assert "pip install 'ctxbudget[postgres]'" in out.stdout and "secret" not in out.stdout


def test_a_malformed_url_is_one_line_saying_the_url_is_wrong(postgres_server: PostgresServer) -> None:
    port = postgres_server.port
    secret = "S3cr3t!@:/?#%"
    malformed = {
        f"postgresql://ctxbudget:{PASSWORD}@[::1:{port}/ctxdb": f"postgresql://ctxbudget@[::1:{port}/ctxdb",
        f"postgresql://ctxbudget:{PASSWORD}@127.0.0.1:{port}/postgres?bogus=1": (
            f"postgresql://ctxbudget@127.0.0.1:{port}/postgres?bogus=1"
        ),
        f"postgresql://ctxbudget:{secret}@127.0.0.1:{port}/db": f"postgresql://ctxbudget@127.0.0.1:{port}/db",
        f"postgresql://ctxbudget:pw@ss@127.0.0.1:{port}/db": f"postgresql://ctxbudget@127.0.0.1:{port}/db",
    }
    for url, shown in malformed.items():
        error = _error(url)
        assert type(error) is StoreError and error.path == shown, (url, error)
        assert "is not a valid PostgreSQL URL (" in str(error) and "percent-encode" in error.hint, error
        for fragment in (PASSWORD, "3cr", ":/", "#%", "!@", "ss@", "pw"):
            assert fragment not in str(error).replace(shown, ""), (fragment, str(error))
        result = CliRunner().invoke(main, ["session", "list", "--store", url])
        assert result.exit_code == 2 and "Traceback" not in result.output + result.stderr
        assert result.stderr.count("\n") == 1 and PASSWORD not in result.stderr and "3cr" not in result.stderr
    assert "bogus" in str(_error(f"postgresql://ctxbudget:{PASSWORD}@127.0.0.1:{port}/postgres?bogus=1"))


def test_an_uppercase_scheme_connects(postgres_url: str) -> None:
    upper = "POSTGRESQL" + postgres_url.removeprefix("postgresql")
    store = connect_store(upper)
    store.create(META)
    assert store.location == postgres_url.replace(f":{PASSWORD}@", "@")
    assert connect_store(postgres_url, mode="read").names() == ["s"]


def test_write_mode_on_a_database_without_a_store_creates_nothing(postgres_url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"holds no ctxbudget session store .*session new") as caught:
        connect_store(postgres_url, mode="write")
    assert not isinstance(caught.value, StoreUnavailable)
    result = CliRunner().invoke(main, ["session", "add", "s", "--question", "q", "--store", postgres_url])
    assert result.exit_code == 2 and "holds no ctxbudget session store" in result.stderr
    with psycopg.connect(postgres_url) as conn:
        found = conn.execute("SELECT COUNT(*) FROM pg_namespace WHERE nspname = 'ctxbudget'").fetchone()
        assert found == (0,)
    base = tmp_path / "base.json"
    base.write_text('{"items": []}')
    new = ["session", "new", "s", "--base", str(base), "--model", "gpt-4o", "--store", postgres_url]
    assert CliRunner().invoke(main, new).exit_code == 0  # `session new` creates the store
    assert connect_store(postgres_url, mode="write").names() == ["s"]
