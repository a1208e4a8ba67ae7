"""Python's cycle collector paused while a fit or an assembly runs.

A fit allocates many small containers that live until it ends (an item, segments, spans and a
report line per message, each a tracked object), so the collector runs over and over during it,
each time traversing everything still alive, and promotes what it traverses to older generations
it then traverses again. None of it is cyclic garbage: reference counting frees it all when the
fit returns. Measured on a 2,000-message history fit into 8,000 tokens (counts cached, medians of
15): 88 ms with the collector, 59 ms with it paused.

The pause is process-wide, so it is counted: the first of any concurrent or nested fits to start
disables the collector (only if it was enabled), and the last to end enables it again. Cycles made
while it is paused are collected by the next automatic collection after it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_active = 0
_paused_by_us = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cycle collector disabled (restored when the last such body ends)."""
    global _active, _paused_by_us
    with _lock:
        if _active == 0 and gc.isenabled():
            gc.disable()
            _paused_by_us = True
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _paused_by_us:
                _paused_by_us = False
                gc.enable()
