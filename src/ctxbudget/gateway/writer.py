"""The store's writer: answered turns are committed off the event loop, in the order answered.

A commit (SQLite in WAL mode with ``synchronous=FULL``) waits for an fsync: 0.5 ms typically and
8 ms at the 95th percentile on a shared disk; on PostgreSQL, a round trip and the server's own
flush. Run on the event loop it would hold up every other request for that long, so a turn is
handed to one writer thread the moment its answer is complete, and the answer awaits the commit's
future before the client gets its end (a turn answered is a turn stored).

One thread, first in first out: a session's turns are committed in the order they were answered
(a client's next turn can only be answered after it saw the previous answer, so after that turn
was handed over). :meth:`TurnWriter.flush` waits for every turn handed over before it; anything
that reads the store back (policy mode's previous turn after a restart) flushes first.
:meth:`TurnWriter.close` flushes at shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["TurnWriter", "committed"]
T = TypeVar("T")


class TurnWriter:
    """One thread that runs store commits in the order they were handed over."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxbudget-store")

    def submit(self, commit: Callable[[], T]) -> Future[T]:
        """Run ``commit`` after every commit handed over before it; its future (``commit`` logs
        and counts its own failures and returns what the caller must know of them)."""
        return self._pool.submit(commit)

    def flush(self) -> None:
        """Wait until every commit handed over before this call is done."""
        self._pool.submit(_nothing).result()

    def close(self) -> None:
        """Finish every commit handed over, then stop the thread."""
        self._pool.shutdown(wait=True)


def _nothing() -> None:
    """A marker in the queue: done once everything before it is."""


async def committed(future: Future[T]) -> T:
    """The result of a commit handed to the writer, awaited without holding up the event loop."""
    return await asyncio.wrap_future(future)
