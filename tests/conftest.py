from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The suite's vocabulary images go to a folder of its own, never the user's cache (subprocesses
# started by tests inherit it).
os.environ.setdefault(
    "CTXBUDGET_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"ctxbudget-tests-{os.getuid()}")
)

from ctxbudget.tokens import get_encoding

from .fake_upstream import FakeUpstream, gateway_over_fake
from .postgres_server import PostgresServer, find_bin_folder


@pytest.fixture(scope="session")
def o200k() -> Any:
    return get_encoding("o200k_base")


def question(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"role": "", "questions": [], "documents": [], "history": []}
    body.update(fields)
    return body


@pytest.fixture()
def stack(tmp_path: Path) -> Iterator[tuple[FakeUpstream, str, Path]]:
    """A fake upstream, a gateway in front of it (1 s upstream timeout), and the gateway's store."""
    store = tmp_path / "gw.db"
    with gateway_over_fake(store, timeout_seconds=1.0) as (fake, url):
        yield fake, url, store


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the tests' own for the whole run; skipped when none is installed,
    but a failure under CI (CI=true), where .ci/run installs one."""
    bin_folder = find_bin_folder()
    missing = None
    if bin_folder is None:
        missing = "no PostgreSQL server (initdb, pg_ctl, postgres) on PATH or under /usr/lib/postgresql/*/bin"
    elif importlib.util.find_spec("psycopg_pool") is None:
        missing = "psycopg is not installed: pip install 'ctxbudget[postgres]'"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing} (CI runs the PostgreSQL store's tests: install postgresql)")
        pytest.skip(missing)
    assert bin_folder is not None
    server = PostgresServer.start(bin_folder)
    yield server
    server.stop()


@pytest.fixture()
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the tests' server."""
    return postgres_server.database()


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store is, for each kind: an SQLite file, or a PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    url: str = request.getfixturevalue("postgres_url")
    return url
