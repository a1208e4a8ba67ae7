"""The gateway's decisions inside the client's own process: httpx transports that fit each
Anthropic Messages, OpenAI Chat Completions or Responses request before handing it to the real
transport, so an SDK gets the gateway's budgets with no server to run::

    client = anthropic.Anthropic(http_client=httpx.Client(transport=FittingTransport(max_context_tokens=32000)))

The transports take requests from ``httpx`` clients and from ``httpx2`` ones alike (pydantic's
continuation of httpx, which the current Anthropic and OpenAI SDKs are built on: give them an
``httpx2.Client``); they answer in the client's own module's types.

The decision is the gateway's own (:func:`.intake.first_pass`: the same body checks, session
name, ``X-Ctxbudget-*`` request headers, fit, cost ceiling and refusals), and the answer carries
the same ``x-ctxbudget-*`` headers. A refusal is answered by the transport itself, in the
provider's error shape, so the SDK raises its usual exception and nothing is sent. Every other
request (count_tokens, files, models, GET) passes through untouched. Not here, because they
belong to a server: the session store, calibration from usage, policy mode's previous turn,
asking the upstream to count. The report of the latest decision is :attr:`last_report`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import anyio.to_thread
import httpx

from ..errors import ConfigError, reworded
from ..session.store import SQLiteStore
from .config import GatewayConfig
from .intake import INLINE_BYTES, Progress, check_coding, first_pass, held_bytes, sent_bytes
from .prepared import Prepared
from .providers import ANTHROPIC, OPENAI, RESPONSES, Provider
from .refusals import Refusal, with_settings
from .service import Gateway
from .settings import HEADER_PREFIX

__all__ = ["AsyncFittingTransport", "FittingTransport"]

FITTED = (ANTHROPIC, OPENAI, RESPONSES)
# A refusal's advice names the transport's options where the gateway's names its serve flags.
TRANSPORT_WORDS = (
    (" (or serve --max-context-tokens)", " (or FittingTransport(max_context_tokens=))"),
    ("serve --max-context-tokens", "FittingTransport(max_context_tokens=)"),
    ("serve --catalog FILE", "FittingTransport(catalog_paths=[FILE])"),
    ("serve --unknown-model floor", 'FittingTransport(unknown_model="floor")'),
    ("serve --cost-ceiling", "FittingTransport(cost_ceiling_usd=)"),
    (
        "X-Ctxbudget-Cost-Ceiling may only lower the server's",
        "X-Ctxbudget-Cost-Ceiling may only lower FittingTransport(cost_ceiling_usd=)",
    ),
    (
        "(serve --allow-policy NAME)",
        "(a FittingTransport fits requests; policies are ctxbudget serve's: --allow-policy NAME)",
    ),
)


def _in_transport_words(report: Mapping[str, Any]) -> Mapping[str, Any]:
    """The report as this transport's caller reads it: its warnings name the transport's options
    (an unknown id's warning said `set max_context_tokens=`, a library argument)."""
    warnings = report.get("warnings")
    if not warnings:
        return report
    return {**report, "warnings": [_in_transport_wording(str(w)) for w in warnings]}


def _in_transport_wording(message: str) -> str:
    """A library message as this transport's caller reads it: options named as the transport's."""
    return reworded(with_settings(message), TRANSPORT_WORDS)


class _Decider:
    """What both transports share: a gateway's decision path with no server around it."""

    def __init__(self, config: GatewayConfig) -> None:
        # nothing is stored: each session's previous turn is remembered (its held history cut)
        self._gateway = Gateway(config, store=SQLiteStore(":memory:"), records=False)
        self._lock = threading.Lock()
        self.last_report: Mapping[str, Any] | None = None

    @staticmethod
    def provider(request: httpx.Request) -> Provider | None:
        """The API a request is for, when it is one the gateway fits."""
        if request.method != "POST":
            return None
        return next((p for p in FITTED if request.url.path.endswith(p.path)), None)

    def decide(
        self, provider: Provider, request: httpx.Request, data: bytes
    ) -> tuple[httpx.Request, Prepared] | httpx.Response:
        """The request to send in ``request``'s place with its decision, or the refusal to answer."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            check_coding(headers)  # as the served gateway refuses it: 415, not a decoding error
            ready = first_pass(self._gateway, provider, headers, [data], Progress(0, 0.0))
        except Refusal as refusal:
            return _refused(provider, refusal, request)
        with self._lock:
            self.last_report = _in_transport_words(ready.prepared.report)
        kept = [(k, v) for k, v in request.headers.raw if not _dropped(k.decode("latin-1"))]
        content = sent_bytes(held_bytes(data), ready.body, ready.prepared.body)
        outgoing: httpx.Request = _module(request).Request(
            request.method, request.url, headers=kept, content=content, extensions=request.extensions
        )
        return outgoing, ready.prepared

    def answered(self, response: httpx.Response, prepared: Prepared) -> httpx.Response:
        """The upstream's answer with the decision's ``x-ctxbudget-*`` headers; an answer given
        (2xx) makes the request its session's previous turn (the history cut the next one holds)."""
        if response.status_code < 300:
            with self._lock:
                self._gateway.memory.remember(prepared, None)
        for key, value in prepared.headers(_in_transport_wording).items():
            response.headers.setdefault(key, value)
        return response

    def close(self) -> None:
        """Release the decision path's resources."""
        self._gateway.close()
        self._gateway.store.close()


class _Fitting:
    """What both transports hold: the decision path, and the transports they send through.

    ``max_context_tokens`` (0: the model's window), ``cost_ceiling_usd``, ``catalog_paths`` and
    ``unknown_model`` mean what ``ctxbudget serve``'s options mean (a request may narrow them with
    ``X-Ctxbudget-*`` headers); ``transport`` is the one to send through (default: the client
    library's own, ``httpx`` or ``httpx2``, whichever the request comes from)."""

    _default = ""  # the name of the client library's own transport class
    _sends = ""  # the method a transport sends with (sync or async)

    def __init__(
        self,
        *,
        max_context_tokens: int = 0,
        cost_ceiling_usd: float | None = None,
        catalog_paths: tuple[str, ...] = (),
        unknown_model: str = "error",
        transport: Any = None,
    ) -> None:
        config = GatewayConfig(
            max_context_tokens=max_context_tokens,
            cost_ceiling_usd=cost_ceiling_usd,
            catalog_paths=catalog_paths
            if isinstance(catalog_paths, str)
            else tuple(catalog_paths),  # a str refused
            unknown_model=unknown_model,  # type: ignore[arg-type]
            store_path=":memory:",
            pass_through=True,  # what it does not fit it sends on as it came (a background response too)
        )
        self._config = config
        self._decider: _Decider | None = _Decider(config)
        self._closed_report: Mapping[str, Any] | None = None  # the last report of a decider closed
        if transport is not None and not callable(getattr(transport, self._sends, None)):
            raise ConfigError(
                f"transport must be an httpx (or httpx2) transport, one with {self._sends}(), "
                f"got {type(transport).__name__} {transport!r:.60}"
            )
        self._given = transport
        self._inners: dict[str, Any] = {}  # the default transport of each HTTP library seen
        self._building = threading.Lock()

    @property
    def last_report(self) -> Mapping[str, Any] | None:
        """The report of the latest request fitted (the gateway's ``tokens_before`` and the rest)."""
        decider = self._decider
        return decider.last_report if decider is not None else self._closed_report

    def _deciding(self) -> _Decider:
        """The decision path; one closed with the transport (a client's ``close`` closes its
        transport) is made again for the next request, as httpx's own transports open new
        connections after theirs were closed: a second client over the same transport had its
        fitted requests fail on a closed store. What a closed one remembered (each session's
        previous turn) went with it."""
        with self._building:
            if self._decider is None:
                self._decider = _Decider(self._config)
                self._decider.last_report = self._closed_report
            return self._decider

    def _close_decider(self) -> None:
        with self._building:
            decider, self._decider = self._decider, None
            if decider is not None:
                self._closed_report = decider.last_report
        if decider is not None:
            decider.close()

    def _inner(self, request: httpx.Request) -> Any:
        module = _module(request)
        if self._given is not None:
            given = type(self._given).__module__.partition(".")[0]
            if given in ("httpx", "httpx2") and given != module.__name__:
                raise ConfigError(
                    f"the transport given is an {given} transport, but the client sending through it is "
                    f"an {module.__name__} one; give a transport of the client's library "
                    f"({module.__name__}.{self._default}), or none"
                )
            return self._given
        inner = self._inners.get(module.__name__)
        if inner is None:  # built once a library (``setdefault`` built one every request, never closed)
            with self._building:  # threads sending their first requests at once built one each
                inner = self._inners.get(module.__name__)
                if inner is None:
                    inner = self._inners[module.__name__] = getattr(module, self._default)()
        return inner

    def _sent_through(self) -> list[Any]:
        return [t for t in (self._given, *self._inners.values()) if t is not None]


class FittingTransport(_Fitting, httpx.BaseTransport):
    """An httpx (or httpx2) transport that fits Anthropic and OpenAI requests before sending them
    (see the module docstring and :class:`_Fitting` for the options)."""

    _default = "HTTPTransport"
    _sends = "handle_request"

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        provider = _Decider.provider(request)
        if provider is None:
            return self._inner(request).handle_request(_unmarked(request))  # type: ignore[no-any-return]
        decider = self._deciding()
        decided = decider.decide(provider, request, request.read())
        if not isinstance(decided, tuple):
            return decided
        outgoing, prepared = decided
        return decider.answered(self._inner(request).handle_request(outgoing), prepared)

    def close(self) -> None:
        for inner in self._sent_through():
            inner.close()
        self._close_decider()


class AsyncFittingTransport(_Fitting, httpx.AsyncBaseTransport):
    """:class:`FittingTransport` for async clients: a large body is fitted in a worker thread, so
    the event loop is not held up by it."""

    _default = "AsyncHTTPTransport"
    _sends = "handle_async_request"

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        provider = _Decider.provider(request)
        if provider is None:
            return await self._inner(request).handle_async_request(_unmarked(request))  # type: ignore[no-any-return]
        data = await request.aread()
        decider = self._deciding()
        if len(data) <= INLINE_BYTES:
            decided = decider.decide(provider, request, data)
        else:
            decided = await anyio.to_thread.run_sync(decider.decide, provider, request, data)
        if not isinstance(decided, tuple):
            return decided
        outgoing, prepared = decided
        return decider.answered(await self._inner(request).handle_async_request(outgoing), prepared)

    async def aclose(self) -> None:
        for inner in self._sent_through():
            await inner.aclose()
        self._close_decider()


def _module(request: httpx.Request) -> ModuleType:
    """The HTTP library the request comes from (``httpx`` or ``httpx2``): answers are built from it."""
    return sys.modules[type(request).__module__.partition(".")[0]]


def _dropped(header: str) -> bool:
    """Headers not forwarded: ctxbudget's own, and the length of the body that was replaced."""
    return _own(header) or header.lower() in ("content-length", "transfer-encoding")


def _unmarked(request: httpx.Request) -> httpx.Request:
    """A request passed through, less ctxbudget's own headers (never sent on, as the gateway's
    pass-through drops them: a client's ``default_headers`` carried them to every models, files or
    Azure deployment request); the rest as it came, its body unread."""
    if not any(_own(k) for k in request.headers):
        return request
    # as their bytes: a value that is not ASCII (``X-Title: Café``) was refused, as text httpx
    # encodes only in ASCII
    kept = [(k, v) for k, v in request.headers.raw if not _own(k.decode("latin-1"))]
    passed: httpx.Request = _module(request).Request(
        request.method, request.url, headers=kept, stream=request.stream, extensions=request.extensions
    )
    return passed


def _own(header: str) -> bool:
    return header.lower().startswith(HEADER_PREFIX)


def _refused(provider: Provider, refusal: Refusal, request: httpx.Request) -> httpx.Response:
    """The refusal, answered as the provider would answer an error."""
    body = provider.error_body(refusal.status, reworded(str(refusal), TRANSPORT_WORDS), refusal.code)
    response: httpx.Response = _module(request).Response(
        refusal.status, json=body, headers=refusal.headers, request=request
    )
    return response
