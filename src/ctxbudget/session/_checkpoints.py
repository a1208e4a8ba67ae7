"""Write-ahead log checkpoints off the committing thread, for a store whose commits someone waits on.

SQLite in WAL mode appends each commit to the log; once the log holds 1,000 pages (about 4 MB),
the commit that crosses that line also copies the log into the database file and syncs it (an
automatic checkpoint). The gateway's answer waits for its turn's commit, so that one answer in
every 4 MB of turns waited for the copy too: a turn holding a 100,000-token question (0.5 MB)
committed in 8-10 ms, and every eighth in 34-47 ms (`bench/bench_gateway_large.py`).

With :class:`BackgroundCheckpoints` the committing connection never checkpoints
(``wal_autocheckpoint=0``); after each commit the store tells it how much it wrote, and once
about 1,000 pages were written since the last checkpoint a daemon thread runs a passive
checkpoint on a connection of its own. A passive checkpoint takes no lock a writer waits for:
commits go on while it copies. The pages a commit writes are estimated (its stored bodies over
the page size, plus the few b-tree pages every commit touches); the estimate only says when to
checkpoint. A checkpoint that fails is logged and tried again at the next threshold; the log
then grows meanwhile, as it does while a reader holds it. Closing the store stops the thread
first, so that its own connection's close is the last and checkpoints the log into the file.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["CHECKPOINT_PAGES", "BackgroundCheckpoints"]

_log = logging.getLogger(__name__)

# SQLite's own automatic checkpoint threshold (pages in the log).
CHECKPOINT_PAGES = 1000
# Pages every commit writes besides its bodies: the b-tree leaves of the rows and indexes it touches.
_PAGES_PER_COMMIT = 4


class BackgroundCheckpoints:
    """A daemon thread that checkpoints the store file at ``absolute`` when told enough was
    written (:meth:`wrote`), until :meth:`close`."""

    def __init__(self, absolute: str, page_size: int, busy_timeout_seconds: float) -> None:
        self._uri = Path(absolute).as_uri() + "?mode=rw"  # never creates the file
        self._page_size = max(512, page_size)
        self._busy = busy_timeout_seconds
        self._pages = 0
        self._wake = threading.Event()
        self._stopping = False
        self.done = 0  # checkpoints completed (read by tests and the curious)
        self._thread = threading.Thread(target=self._run, name="ctxbudget-checkpoint", daemon=True)
        self._thread.start()

    def wrote(self, size: int) -> None:
        """After a commit that stored ``size`` bytes of bodies: a checkpoint once enough was written."""
        self._pages += _PAGES_PER_COMMIT + size // self._page_size
        if self._pages >= CHECKPOINT_PAGES:
            self._pages = 0
            self._wake.set()

    def _run(self) -> None:
        db: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    if db is None:
                        db = sqlite3.connect(self._uri, uri=True, isolation_level=None, timeout=self._busy)
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.done += 1
                except sqlite3.Error as exc:
                    _log.warning("store checkpoint failed (the log grows until one succeeds): %s", exc)
        finally:
            if db is not None:
                db.close()

    def close(self) -> None:
        """Stop the thread and close its connection (before the store closes its own: SQLite's
        last checkpoint is the last connection's)."""
        self._stopping = True
        self._wake.set()
        self._thread.join()
