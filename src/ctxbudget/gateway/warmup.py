"""What a gateway's first request would otherwise pay, paid as it starts.

A fresh ``ctxbudget serve`` answered its first small request in 97-144 ms and its second in
6-9 ms (fake upstream on loopback, this machine kind). The first built the tokenizer (60-110 ms:
the vocabulary and tiktoken's ``Encoding``) and imported what the HTTP client loads at its first
upstream call (anyio's asyncio backend: 28 ms). The app's start-up now does both
(:func:`warm_up`), before the server takes a request: the first then took 12-30 ms (six fresh
processes each way; ``bench/bench_gateway.py`` prints it). A deployment that adds replicas under
load, or restarts them one by one, no longer stalls one request on each.

A server that owns its process also freezes what start-up left alive (:func:`settle_heap`): the
cycle collector's full passes traversed those objects each time, 27-31 ms a pass in a served
gateway (one in 3,000-4,000 small requests, holding up every request in flight). None came in
4,000 requests once frozen; in one process a pass took 11-15 ms before and 0.04-0.2 ms after.
Nothing frozen is garbage: modules, the catalog, the tokenizer, the policies.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging

from ..catalog.catalog import Catalog
from ..tokens.counter import TokenCounter
from ..tokens.registry import get_encoding

__all__ = ["FIRST_CALL_MODULES", "settle_heap", "warm_up"]

logger = logging.getLogger(__name__)

# What an ``httpx.AsyncClient`` imports at its first request (found by comparing ``sys.modules``
# before and after one; tests/test_gateway_warmup.py checks it); a name a later version drops is
# passed over.
FIRST_CALL_MODULES = ("anyio._backends._asyncio",)
# Counted once: letters, digits, punctuation and a character beyond ASCII.
_WARM_TEXT = "Notice was given on 3 March 2026 (clause 12.4), déjà vu."


def warm_up(catalog: Catalog) -> None:
    """Build and use the catalog's default encoding (what every model without a tokenizer of its
    own counts with, and the bundled catalog's every current OpenAI model and every estimate), and
    import :data:`FIRST_CALL_MODULES`. An encoding that cannot be built is logged: the request
    that needs it says why, as without a warm-up."""
    name = catalog.default_tokenizer.encoding
    try:
        TokenCounter(get_encoding(name), exact=True).raw(_WARM_TEXT)
    except Exception as exc:  # the gateway still serves the models whose encodings load
        logger.warning("could not warm the encoding %r: %s: %s", name, type(exc).__name__, exc)
    for module in FIRST_CALL_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)


def settle_heap() -> None:
    """Collect the garbage start-up left, then freeze every object still alive out of the cycle
    collector's passes (``gc.freeze``): only for a process the server owns."""
    gc.collect()
    gc.freeze()
