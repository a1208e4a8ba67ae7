"""The store's writer: answered turns are committed off the event loop, in the order answered.

A commit (SQLite in WAL mode with ``synchronous=FULL``) waits for an fsync: 0.5 ms typically and
8 ms at the 95th percentile on a shared disk; on PostgreSQL, a round trip and the server's own
flush. Run on the event loop it would hold up every other request for that long, so a turn is
handed to one writer thread the moment its answer is complete, and the answer awaits the commit's
future before the client gets its end (a turn answered is a turn stored).

A few threads ("lanes"), each first in first out; a session's turns always go to the same lane
(by a hash of its name), so they are committed in the order they were answered, while a session
whose lock is held elsewhere (another replica, a long transaction) holds up only the sessions
that share its lane, not every session of the replica. :meth:`TurnWriter.flush` waits for every
turn handed over before it; :meth:`TurnWriter.close` flushes at shutdown.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["TurnWriter", "committed"]
T = TypeVar("T")


class TurnWriter:
    """Threads that run store commits, those of one key in the order they were handed over."""

    def __init__(self, lanes: int = 4) -> None:
        self._lanes = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ctxbudget-store-{n}") for n in range(lanes)
        ]

    def submit(self, key: str, commit: Callable[[], T]) -> Future[T]:
        """Run ``commit`` after every commit of ``key`` (a session) handed over before it; its
        future (``commit`` logs and counts its own failures and returns what the caller must
        know of them)."""
        lane = self._lanes[zlib.crc32(key.encode("utf-8")) % len(self._lanes)]
        return lane.submit(commit)

    def flush(self) -> None:
        """Wait until every commit handed over before this call is done."""
        for future in [lane.submit(_nothing) for lane in self._lanes]:
            future.result()

    def close(self) -> None:
        """Finish every commit handed over, then stop the threads."""
        for lane in self._lanes:
            lane.shutdown(wait=True)


def _nothing() -> None:
    """A marker in the queue: done once everything before it is."""


async def committed(future: Future[T]) -> T:
    """The result of a commit handed to the writer, awaited without holding up the event loop."""
    return await asyncio.wrap_future(future)
