"""What a gateway's first request would otherwise pay, paid as it starts.

A fresh ``ctxbudget serve`` answered its first small request in 97-144 ms and its second in
6-9 ms (fake upstream on loopback, this machine kind). The first built the tokenizer (the
vocabulary, and tiktoken's ``Encoding`` for any text beyond short ASCII: 60-140 ms) and imported
what the HTTP client loads at its first upstream call (anyio's asyncio backend: 28 ms). The app's
start-up now does both (:func:`warm_up`) before the server takes a request: the first then took
12-30 ms (six fresh processes each way; ``bench/bench_gateway.py`` prints it). A deployment that
adds replicas under load, or restarts them one by one, no longer stalls one request on each; nor
does the request, a few hundred into a replica's life, that brought in its first text beyond
short ASCII (tiktoken's build, which :mod:`..tokens.small` puts off for a command's short counts,
is made at start-up: about 45 MiB that a gateway holds from then on instead of from then).

The warm-up runs on a thread of its own and is waited for at most :data:`WARM_UP_SECONDS`: a
plug-in tokenizer whose build hangs delays the server's start by that much, not for as long as
it hangs (the requests that need that tokenizer wait for it, as without a warm-up). A tokenizer
that fails to build, or panics, is logged, and the gateway starts: the request that needs it
fails as it would have.

A server that owns its process also freezes what start-up left alive (:func:`settle_heap`): the
cycle collector's full passes traversed those objects each time, 27-31 ms a pass in a served
gateway (one in 3,000-4,000 small requests, holding up every request in flight). None came in
4,000 requests once frozen; in one process a pass took 11-15 ms before and 0.04-0.2 ms after.
Nothing frozen is garbage: modules, the catalog, the tokenizer, the policies.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import threading

from ..catalog.catalog import Catalog
from ..tokens.counter import TokenCounter
from ..tokens.encoding import is_error
from ..tokens.registry import get_encoding

__all__ = ["FIRST_CALL_MODULES", "WARM_UP_SECONDS", "settle_heap", "warm_up", "warmed", "warmed_encodings"]

logger = logging.getLogger(__name__)

# What an ``httpx.AsyncClient`` imports at its first request (found by comparing ``sys.modules``
# before and after one; tests/test_gateway_warmup.py checks it); a name a later version drops is
# passed over.
FIRST_CALL_MODULES = ("anyio._backends._asyncio",)
# The encoding of the bundled catalog's current OpenAI models and of its Claude and Gemini estimates.
BUNDLED_DEFAULT = "o200k_base"
# Counted once each: short ASCII, and text beyond it (which tiktoken counts).
_WARM_TEXTS = ("Notice was given on 3 March 2026 (clause 12.4).", "Déjà vu: the notice, again.")
WARM_UP_SECONDS = 5.0  # the longest the server's start waits for the warm-up


def warmed_encodings(catalog: Catalog) -> list[str]:
    """The encodings a gateway warms: its catalog's default (what a model with no tokenizer of its
    own counts with) and the bundled catalog's, which a user catalog's models join."""
    return list(dict.fromkeys([catalog.default_tokenizer.encoding, BUNDLED_DEFAULT]))


def warm_up(catalog: Catalog) -> None:
    """Build and use each of :func:`warmed_encodings`, and import :data:`FIRST_CALL_MODULES`.
    Never raises: an encoding that cannot be built, or whose tokenizer panics, is logged."""
    for name in warmed_encodings(catalog):
        try:
            counter = TokenCounter(get_encoding(name), exact=True)
            for text in _WARM_TEXTS:
                counter.raw(text)
        except BaseException as exc:  # pyo3's panic derives from BaseException
            if not is_error(exc):
                raise
            logger.warning("could not warm the encoding %r: %s: %s", name, type(exc).__name__, exc)
    for module in FIRST_CALL_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)


async def warmed(catalog: Catalog) -> bool:
    """:func:`warm_up` on a daemon thread (one that hangs does not hold up the process's exit),
    waited for at most :data:`WARM_UP_SECONDS`: whether it finished by then."""
    loop = asyncio.get_running_loop()
    finished = loop.create_future()

    def settle() -> None:
        if not finished.done():
            finished.set_result(None)

    def run() -> None:
        try:
            warm_up(catalog)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(settle)

    threading.Thread(target=run, name="ctxbudget-warm-up", daemon=True).start()
    try:
        await asyncio.wait_for(asyncio.shield(finished), WARM_UP_SECONDS)
    except TimeoutError:
        logger.warning(
            "the warm-up (building the tokenizers %s) took over %g s: serving meanwhile",
            ", ".join(warmed_encodings(catalog)),
            WARM_UP_SECONDS,
        )
        return False
    return True


def settle_heap() -> None:
    """Collect the garbage start-up left, then freeze every object still alive out of the cycle
    collector's passes (``gc.freeze``): only for a process the server owns, once (an app made and
    started again with it freezes what is alive each time, and a frozen object is never freed)."""
    gc.collect()
    gc.freeze()
