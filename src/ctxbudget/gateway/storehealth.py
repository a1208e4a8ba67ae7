"""Whether the session store serves: what the gateway refuses while it does not, and what
``/healthz`` and ``/metrics`` report.

The store is trusted until an operation on it fails. From then on every request first makes a
round trip to it (:meth:`~.service.Gateway.store_ready`) and is refused with a 503 in the
provider's shape while it still fails, so nothing is sent upstream that could not be recorded;
the first round trip that succeeds clears it. A failure while an answered turn is committed
withholds that answer (503) too: the client retries, and what it was told is what is stored.
With ``serve --store-fail-open`` requests are sent and answered anyway; the turns the store did
not take are logged and counted (``ctxbudget_record_failures``).
"""

from __future__ import annotations

import logging
import threading

from ..errors import StoreError
from .metrics import Metrics
from .refusals import Refusal

__all__ = ["StoreHealth"]

logger = logging.getLogger(__name__)


class StoreHealth:
    """The store's state as the last operation on it found it, mirrored in the metrics."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.up = True
        self.cause = ""
        self._lock = threading.Lock()
        metrics.store_up.set(1)

    def failed(self, exc: StoreError, *, answered: bool) -> Refusal:
        """Note a failure of the store; the refusal that tells the client (the caller raises it
        unless the gateway fails open)."""
        with self._lock:
            if self.up:
                logger.error("the session store failed: %s", exc)
            self.up, self.cause = False, str(exc)
        self.metrics.store_up.set(0)
        self.metrics.store_errors.labels("commit" if answered else "check").inc()
        done = (
            "the answer was not stored and is withheld; retry the request" if answered else "nothing was sent"
        )
        message = f"ctxbudget: the session store is unavailable ({exc}); {done}"
        return Refusal(503, message, "store_unavailable", {"retry-after": "1"})

    def recovered(self) -> None:
        """Note that the store served."""
        if self.up:
            return
        with self._lock:
            self.up, self.cause = True, ""
        self.metrics.store_up.set(1)
        logger.warning("the session store serves again")
