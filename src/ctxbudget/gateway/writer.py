"""The store's writer: answered turns are committed off the answer's path, in the order answered.

A commit (SQLite in WAL mode with ``synchronous=FULL``) waits for an fsync: 0.5 ms typically and
8 ms at the 95th percentile on a shared disk, the largest part of the gateway's overhead when the
client waited for it. Instead, a turn is handed to one writer thread the moment its answer is
complete, before the client is sent it; the client gets the answer while the turn is committed.

One thread, first in first out: a session's turns are committed in the order they were answered
(a client's next turn can only be answered after it saw the previous answer, so after that turn
was handed over). :meth:`TurnWriter.flush` waits for every turn handed over before it; anything
that reads the store back (policy mode's previous turn after a restart) flushes first. Each
answer's response waits for its own commit after it was sent, so a server that shuts down
gracefully finishes every commit it accepted; :meth:`TurnWriter.close` flushes at shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["TurnWriter", "committed"]


class TurnWriter:
    """One thread that runs store commits in the order they were handed over."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxbudget-store")

    def submit(self, commit: Callable[[], None]) -> Future[None]:
        """Run ``commit`` after every commit handed over before it; its future (``commit`` logs
        and counts its own failures: the future never holds an error the caller must read)."""
        return self._pool.submit(commit)

    def flush(self) -> None:
        """Wait until every commit handed over before this call is done."""
        self._pool.submit(_nothing).result()

    def close(self) -> None:
        """Finish every commit handed over, then stop the thread."""
        self._pool.shutdown(wait=True)


def _nothing() -> None:
    """A marker in the queue: done once everything before it is."""


async def committed(pending: list[Future[None]]) -> None:
    """Wait for ``pending`` commits without holding up the event loop (a response's background
    task: the server's graceful shutdown waits for it)."""
    for future in pending:
        await asyncio.wrap_future(future)
