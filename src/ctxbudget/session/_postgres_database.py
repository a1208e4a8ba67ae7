"""The PostgreSQL database under a session store: its URL shown without the password, its schema
checked and migrated, and its failures named.

The store's tables live in their own schema, ``ctxbudget``, so a database shared with other
programs is fine; they are made by the same numbered migrations as the SQLite store's
(:data:`~._sqlite_file.MIGRATIONS`). Migrating runs in one transaction that first takes a
transaction-scoped advisory lock and then reads ``schema_migrations`` again: replicas starting at
once queue on the lock, the first migrates and the others find the work done. A database already
current is opened without the lock.

Every failure ends in one :class:`~ctxbudget.errors.StoreError` naming the store by its URL
without the password (the password is also scrubbed from the driver's words); a URL libpq cannot
read is refused before connecting, saying the URL is wrong. A server that
cannot be reached (refused, timed out, gone mid-request, no pooled connection in time) is its
:class:`~ctxbudget.errors.StoreUnavailable`.

psycopg is imported inside the functions that need it: the package imports without it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ..errors import StoreError, StoreUnavailable
from ._sqlite_file import LATEST_VERSION, MIGRATIONS, StoreMode, check_version, pending_migrations

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA", "check_url", "lock_key", "mapped_errors", "prepare_schema", "redacted", "store_error"]

SCHEMA = "ctxbudget"
# Advisory lock spaces (the first of the two int4 keys): "ctbm", "ctbs", "ctbc" in ASCII.
MIGRATION_LOCK = (0x6374626D, 0)
SESSION_LOCKS = 0x63746273
CALIBRATION_LOCKS = 0x63746263

UNREACHABLE_HINT = "check that the server is running and the URL's host and port, then retry"
_UNAVAILABLE_STATES = frozenset({"57P01", "57P02", "57P03", "53300"})  # shutdown, starting, too many
# SQLSTATEs that say something about the store, and what to do.
_CAUSES: dict[str, tuple[str, str]] = {
    "55P03": (
        "is locked by another process",
        "retry when the other writer is done, or find the session that holds the lock",
    ),
    "25006": ("is opened read-only", "open it to write (mode='write') to change it"),
    "42501": (
        "refused the operation (permission denied)",
        f"grant the URL's user the rights to create and use schema {SCHEMA}, or use another user",
    ),
    "53100": ("cannot be written (the server's disk is full)", "free space on its disk, then retry"),
}
# What a server that refused a connection said (the driver gives no SQLSTATE then), and what to do.
_REFUSALS: tuple[tuple[str, str, str], ...] = (
    ("authentication failed", "refused the credentials", "check the user and password in the URL"),
    (
        "does not exist",
        "names a database or user the server does not have",
        "create it (createdb NAME), or fix the URL",
    ),
    (
        "no pg_hba.conf entry",
        "refused the connection",
        "allow this host and user in the server's pg_hba.conf",
    ),
)


URL_HINT = "fix the URL: percent-encode special characters in the password, or give it in PGPASSWORD"
_QUERY_PASSWORD = re.compile(r"(?i)([?&])password=([^&#]*)&?")
_QUOTED = re.compile(r'"[^"]*"')
_SYNTAX_WORDS = frozenset({'"="', '"]"', '"@"', '"/"'})  # what libpq says it expected, not the URL


def redacted(url: str) -> tuple[str, str, list[str]]:
    """The URL to connect with (its scheme in lower case, as libpq needs), the URL fit to show
    (no password in its user part or its query), and the secrets to scrub from any text that may
    repeat them. The user part is taken to end at the URL's last ``@``, so a password holding an
    unencoded ``@`` or ``/`` is hidden whole; such a URL is refused (libpq would cut it short)."""
    scheme, sep, rest = url.partition("://")
    target = f"{scheme.lower()}{sep}{rest}"
    userinfo, at, host = rest.rpartition("@")
    user, colon, password = userinfo.partition(":")
    secrets = [password, unquote(password)] if colon and password else []
    secrets += [unquote(m.group(2)) for m in _QUERY_PASSWORD.finditer(url)] + [
        m.group(2) for m in _QUERY_PASSWORD.finditer(url)
    ]
    shown = _QUERY_PASSWORD.sub(lambda m: m.group(1), f"{scheme.lower()}{sep}{user}{at}{host}").rstrip("?&")
    # the longest scrubbed first, equal lengths in one order (a set's order follows the hash seed)
    secrets = sorted({s for s in secrets if s}, key=lambda s: (-len(s), s))
    if "?" not in userinfo and ("@" in userinfo or "/" in userinfo):
        what = "an unencoded '@' or '/'" if colon else "an '@' or '/' in its user name"
        raise StoreError(shown, f"is not a valid PostgreSQL URL (its user part holds {what})", URL_HINT)
    return target, shown, secrets


def check_url(url: str, location: str, secrets: list[str]) -> None:
    """libpq's own reading of the URL: one it cannot parse (an invalid host, an unknown query
    parameter, a stray ``?`` or ``#``) is a :class:`StoreError` saying the URL is wrong. libpq
    quotes the URL in its words; a quoted part not in the shown URL may hold the password, so it
    is left out."""
    from psycopg import ProgrammingError, conninfo

    try:
        conninfo.conninfo_to_dict(url)
    except ProgrammingError as exc:

        def shown(quoted: re.Match[str]) -> str:
            keep = quoted.group(0) in _SYNTAX_WORDS or quoted.group(0)[1:-1] in location
            return quoted.group(0) if keep else "(...)"

        detail = _QUOTED.sub(shown, _detail(exc, secrets))
        raise StoreError(location, f"is not a valid PostgreSQL URL ({detail})", URL_HINT) from None


def lock_key(name: str) -> int:
    """A name's advisory lock key (int4, from its sha256): the same in every process."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big", signed=True)


def _detail(exc: BaseException, secrets: list[str]) -> str:
    """The driver's first line, without its "connection failed: " lead and without secrets."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = text.removeprefix("connection failed: ")
    for secret in secrets:
        text = _scrubbed(text, secret)
    return text


# A secret this long is masked wherever it appears; a shorter one only where it stands alone (a
# password "e" or "valid" masked inside "query" or "invalid" garbled the message and, by the
# places it starred, gave the password away).
WHOLE_SECRET_CHARS = 8


def _scrubbed(text: str, secret: str) -> str:
    if len(secret) >= WHOLE_SECRET_CHARS:
        return text.replace(secret, "***")
    return re.sub(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", "***", text)


# What libpq says of a URL it parsed but whose value it cannot use (an sslmode, a port): the URL
# is wrong, not the server unreachable (retrying cannot help).
_BAD_VALUE = re.compile(r"\binvalid (?:[\w ]+ value|port number|integer value)\b")


def _refused_connection(location: str, detail: str) -> StoreError:
    """A connection that failed: reached and refused (``FATAL``), or not reached at all, or never
    tried for a value of the URL libpq cannot use."""
    if _BAD_VALUE.search(detail):
        return StoreError(location, f"is not a valid PostgreSQL URL ({detail})", URL_HINT)
    if "FATAL" not in detail or "the database system is" in detail or "too many clients" in detail:
        return StoreUnavailable(location, f"cannot be reached ({detail})", UNREACHABLE_HINT)
    for words, what, hint in _REFUSALS:
        if words in detail:
            return StoreError(location, f"{what} ({detail})", hint)
    return StoreError(location, f"refused the connection ({detail})", "check the URL and the server's log")


def store_error(location: str, exc: Exception, secrets: list[str], busy_timeout_seconds: float) -> StoreError:
    """The store error for a driver or pool error: what it says about the store, in one line."""
    import psycopg

    detail = _detail(exc, secrets)
    if type(exc).__name__ == "PoolClosed":
        return StoreError(location, "is closed (its close() was called)", "open the store again to use it")
    if type(exc).__name__ == "PoolTimeout":
        cause = f"cannot be reached (no connection came free in time: {detail})"
        return StoreUnavailable(location, cause, UNREACHABLE_HINT)
    state = getattr(exc, "sqlstate", None)
    if state is None and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return _refused_connection(location, detail)
    if state is not None and (state.startswith("08") or state in _UNAVAILABLE_STATES):
        return StoreUnavailable(location, f"cannot be reached ({detail})", UNREACHABLE_HINT)
    what, hint = _CAUSES.get(state or "", ("failed", "check the server's log"))
    if state == "55P03":
        detail = f"gave up after {busy_timeout_seconds:g} s: {detail}"
    return StoreError(location, f"{what} ({state}: {detail})" if state else f"{what} ({detail})", hint)


@contextmanager
def mapped_errors(location: str, secrets: list[str], busy_timeout_seconds: float) -> Iterator[None]:
    """Driver and pool errors raised in the block become :class:`StoreError` naming the store."""
    try:
        yield
    except Exception as exc:
        import psycopg

        if isinstance(exc, psycopg.Error):
            raise store_error(location, exc, secrets, busy_timeout_seconds) from exc
        raise


def _applied(conn: psycopg.Connection[Any]) -> set[int] | None:
    """The migrations applied (None: no store in this database)."""
    found = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.schema_migrations",)).fetchone()
    if found is None or found[0] is None:
        return None
    return {int(row[0]) for row in conn.execute(f"SELECT version FROM {SCHEMA}.schema_migrations")}


def prepare_schema(conn: psycopg.Connection[Any], location: str, mode: StoreMode) -> None:
    """Check the database's store, and migrate it unless ``mode`` reads; only ``"create"`` makes
    a store in a database without one (as an SQLite store's file must exist unless created). One
    of an older version serves to read if its sessions can be read."""
    applied = _applied(conn)
    if applied is None and mode != "create":
        raise StoreError(
            location,
            f"holds no ctxbudget session store (no {SCHEMA}.schema_migrations table)",
            "check the URL's database, or create the store with its first session (ctxbudget session new)",
        )
    if applied is not None:
        check_version(location, applied)
        if applied.issuperset(version for version, _ in MIGRATIONS):
            return
    if mode != "read":
        _migrate(conn, location)
    elif applied is not None and 1 not in applied:
        raise StoreError(
            location,
            f"has schema version {max(applied, default=0)}, older than this ctxbudget reads ({LATEST_VERSION})",
            "open it once to write (add a turn) to migrate it",
        )


def _migrate(conn: psycopg.Connection[Any], location: str) -> None:
    """Create or migrate the schema in one transaction, deciding again under the lock."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", MIGRATION_LOCK)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(f"SET LOCAL search_path TO {SCHEMA}")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
        applied = {int(row[0]) for row in conn.execute("SELECT version FROM schema_migrations")}
        check_version(location, applied)
        for version, statements in pending_migrations(applied):
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
