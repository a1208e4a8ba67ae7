"""Threads kept for counting ahead (:func:`.counter.count_ahead`), from one assembly to the next.

tiktoken's encode allocates as it goes, and glibc gives a new thread an arena of its own whose
memory is not mapped yet: the legal example's 84k tokens took 18.7-22 ms to encode on a new thread
each time, against 15.5 ms on a thread that had encoded before (medians of 10 calls, the process
held to one CPU; with ``MALLOC_ARENA_MAX=1`` a new thread took 15.3 ms). :data:`KEPT` threads
are kept; a count started while all of them are busy gets a thread of its own, as every count
did before.

A job is handed over the way a new thread is started: the caller waits until a thread has taken
it, releasing the GIL meanwhile, so the thread starts at once and not at the caller's next switch
(up to 5 ms later, while the caller's regexes hold the GIL).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["KEPT", "settled", "start"]

KEPT = 4  # threads kept: concurrent assemblies past this many count on threads of their own


class _Crew:
    """The kept threads (made when first needed) and the jobs started that have not ended."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._pool: ThreadPoolExecutor | None = None
        self._kept_busy = 0  # jobs on the kept threads
        self._running = 0  # jobs on any thread

    def start(self, job: Callable[[], None]) -> Future[None] | None:
        """Run ``job`` on a kept thread, or a thread of its own when every kept one is busy; once
        a thread has taken it, its future (None: no thread could be started)."""
        with self._lock:
            kept = self._kept_busy < KEPT
            if kept and self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=KEPT, thread_name_prefix="ctxbudget-ahead")
            self._kept_busy += kept
            self._running += 1
            pool = self._pool if kept else None
        handed = _Job(self, job, kept)
        try:
            if pool is not None:
                pool.submit(handed)
            else:
                threading.Thread(target=handed, name="ctxbudget-ahead").start()
        except RuntimeError:  # no thread to be had (a limit, a sandbox, the interpreter's exit)
            if handed.drop():
                self.ended(kept)
                return None
        handed.taken.wait()
        return handed.future

    def ended(self, kept: bool) -> None:
        """Count a job's end (or a job that never started)."""
        with self._lock:
            self._kept_busy -= kept
            self._running -= 1
            self._lock.notify_all()

    def settled(self, timeout: float) -> bool:
        """Whether every job started has ended, waiting up to ``timeout`` seconds for it."""
        with self._lock:
            return self._lock.wait_for(lambda: self._running == 0, timeout)


class _Job:
    """A job handed to a thread: ``taken`` once a thread runs it, and never run once dropped (a
    pool queues a job before it starts the thread that fails: a later thread would have run it)."""

    def __init__(self, crew: _Crew, job: Callable[[], None], kept: bool) -> None:
        self._crew, self._job, self._kept = crew, job, kept
        self._lock = threading.Lock()
        self.taken = threading.Event()
        self.future: Future[None] = Future()
        self._state = "waiting"  # then "running", or "dropped"

    def __call__(self) -> None:
        """On the thread: the job, unless it was dropped; then its end counted and told."""
        with self._lock:
            if self._state == "dropped":
                return
            self._state = "running"
        self.taken.set()
        try:
            self._job()
        finally:
            self._crew.ended(self._kept)
            self.future.set_result(None)

    def drop(self) -> bool:
        """Drop the job unless a thread runs it already; whether it is dropped."""
        with self._lock:
            if self._state == "waiting":
                self._state = "dropped"
            return self._state == "dropped"


_CREW = _Crew()


def start(job: Callable[[], None]) -> Future[None] | None:
    """:meth:`_Crew.start` of the process's crew."""
    return _CREW.start(job)


def settled(timeout: float) -> bool:
    """Whether every count started ahead has ended (waiting up to ``timeout`` seconds): an
    abandoned one runs to its end unseen."""
    return _CREW.settled(timeout)


def _forget() -> None:
    """In a child process forked from this one: the parent's threads are not in it, and a pool
    that believed one of them idle would leave a job queued for ever."""
    global _CREW
    _CREW = _Crew()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget)
