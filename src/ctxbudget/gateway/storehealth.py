"""Whether the session store serves: what the gateway refuses while it does not, and what
``/healthz`` and ``/metrics`` report.

The store is trusted until an operation on it fails. From then on each request first asks a
round trip to the store (:meth:`StoreHealth.probe`) and is refused with a 503 in the provider's
shape while it still fails, so nothing is sent upstream that could not be recorded; the first
round trip that succeeds clears it. Round trips are made one at a time and at most once per
:data:`PROBE_EVERY` seconds; while one is on its way, a refusal names the last failure at once,
and nobody waits more than :data:`PROBE_WAIT` for one (``/healthz`` included). A failure while
an answered turn is committed withholds that answer (503) too: the client retries, and what it
was told is what is stored.

With ``serve --store-fail-open`` requests are sent and answered anyway: while the store is down
their turns are not even handed to it (each would wait out the store's timeout), only logged and
counted (``ctxbudget_record_failures``); probes go on in the background, and ``/healthz`` stays
200 (the replica serves) while naming the store's failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import StoreError
from .metrics import Metrics
from .refusals import Refusal

__all__ = ["PROBE_EVERY", "PROBE_WAIT", "StoreHealth", "refusal"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
PROBE_EVERY = 1.0  # seconds between round trips to a store that fails
PROBE_WAIT = 1.0  # the longest a request or /healthz waits for one


class StoreHealth:
    """The store's state as the last operation on it found it, mirrored in the metrics."""

    def __init__(
        self,
        metrics: Metrics,
        ping: Callable[[], None],
        location: str,
        ping_write: Callable[[], None] | None = None,
    ) -> None:
        self.metrics = metrics
        self.ping = ping
        # After a commit failed, the store serves again only once it can take a write: a read
        # answers while another process holds an SQLite file's lock, and requests sent then
        # would be answered upstream (and billed) for their commit to time out again.
        self.ping_write = ping_write or ping
        self.commit_failed = False
        self.location = location
        self.up = True
        self.reached_at = -math.inf  # when (monotonic) the store last served
        self.last_failure: StoreError | None = None
        self._probe: asyncio.Future[StoreError | None] | None = None
        self._probed_at = -math.inf
        metrics.store_up.set(1)

    def failed(self, exc: StoreError, operation: str) -> None:
        """Note a failure of the store in ``operation`` ("commit", "check", "read")."""
        if self.up:
            logger.error("the session store failed: %s", exc)
        self.up, self.last_failure = False, exc
        if self._probe is not None and self._probe.done():  # its "ok" is older than this failure
            self._probe = None
        self.commit_failed = self.commit_failed or operation == "commit"
        self.metrics.store_up.set(0)
        self.metrics.store_errors.labels(operation).inc()

    def recovered(self) -> None:
        """Note that the store served."""
        if not self.up:
            logger.warning("the session store serves again")
        self.up, self.reached_at = True, time.monotonic()
        self.metrics.store_up.set(1)

    def kick(self) -> asyncio.Future[StoreError | None]:
        """The round trip in flight, or a new one when the last is done and old enough."""
        due = time.monotonic() - self._probed_at >= PROBE_EVERY
        if self._probe is None or (self._probe.done() and due):
            self._probed_at = time.monotonic()
            self._probe = in_own_thread(self._round_trip)
        return self._probe

    async def probe(self) -> StoreError | None:
        """The store's failure by a round trip (see the module docstring), or None. While a
        round trip is on its way to a store that failed, the last failure answers at once."""
        probe = self.kick()
        if not probe.done() and not self.up and self.last_failure is not None:
            return self.last_failure
        try:
            return await asyncio.wait_for(asyncio.shield(probe), PROBE_WAIT)
        except TimeoutError:
            cause = f"did not answer a round trip within {PROBE_WAIT:g} s"
            return StoreError(self.location, cause, "check that the store's server is up and reachable")

    def _round_trip(self) -> StoreError | None:
        try:
            (self.ping_write if self.commit_failed else self.ping)()
        except StoreError as exc:
            self.failed(exc, "check")
            return exc
        self.commit_failed = False
        self.recovered()
        return None


def in_own_thread(work: Callable[[], T]) -> asyncio.Future[T]:
    """``work`` run in a thread of its own (a daemon: a round trip that hangs never holds up the
    process's exit), its result a future of the running loop. Not the worker pool that fits large
    bodies: with 40 of them in flight a round trip queued behind them for over :data:`PROBE_WAIT`,
    and ``/healthz`` answered 503 for a store that served every request."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]  # work() returned it

    def run() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = work()
        except BaseException as exc:  # handed to the awaiting side, raised there
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody awaits it
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="ctxbudget-store-probe", daemon=True).start()
    return future


def refusal(exc: StoreError, *, answered: bool) -> Refusal:
    """What the client is told when the store failed: the answer withheld, or nothing sent."""
    done = "the answer was not stored and is withheld; retry the request" if answered else "nothing was sent"
    message = f"ctxbudget: the session store is unavailable ({exc}); {done}"
    return Refusal(503, message, "store_unavailable", {"retry-after": "1"})
