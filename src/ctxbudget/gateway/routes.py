"""The HTTP routes: thin handlers that read, call the gateway, and answer in the provider's shape."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..errors import CtxBudgetError, StoreError
from ..session.store import SessionStore
from ..tokens.encoding import is_error
from ..tokens.fast import use_fast_tokenizers
from .answers import (
    ClientGone,
    complete,
    error_response,
    not_events,
    opening,
    refused,
    relay,
    upstream_failure,
)
from .bodies import header_value, named_session
from .config import GatewayConfig
from .intake import Outbound, Progress, outbound, read_json, rendered
from .passthrough import pass_through, passed_to
from .providers import ANTHROPIC, OPENAI, RESPONSES, Provider
from .refusals import Refusal
from .service import Gateway
from .settings import SESSION_HEADER, SettingsError
from .upstream import check_header_count, forwarded_headers
from .warmup import settle_heap, warmed

__all__ = ["create_app"]

logger = logging.getLogger("ctxbudget.gateway")
Handler = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")


def _log(provider: Provider, progress: Progress, response: Response, outcome: str) -> None:
    """The request's one INFO line: what its answer's headers say (a refusal after the fit, such
    as a ceiling's, names the session and the tokens there too)."""
    headers = response.headers
    before, after = headers.get("x-ctxbudget-tokens-before"), headers.get("x-ctxbudget-tokens-after")
    tokens = f"{before}->{after}" if before is not None and after is not None else "-"
    logger.info(
        "request=%d api=%s session=%s bytes=%d tokens=%s status=%d outcome=%s ms=%.1f",
        progress.rid,
        provider.name,
        progress.session or "-",
        progress.size,
        tokens,
        response.status_code,
        outcome,
        (time.perf_counter() - progress.started) * 1000,
    )


async def _forward(
    request: Request, gateway: Gateway, provider: Provider, progress: Progress
) -> tuple[Response, str]:
    """Read, prepare, send, and answer one request: the response and its outcome."""
    check_header_count(request.headers.raw)
    await gateway.store_ready()  # nothing is prepared or sent that could not be recorded
    ready = await outbound(gateway, provider, request, progress)
    assert ready.content is not None
    progress.stage = "send"
    headers = forwarded_headers(request.headers.items())
    try:
        upstream = await _unless_gone(
            request, gateway.send(provider, ready.content, headers, request.url.query)
        )
        if ready.usage_added and upstream.status_code == 400 and "stream_options" not in ready.body:
            upstream, ready = await _unless_usage_refused(
                request, gateway, provider, upstream, ready, headers
            )
    except ClientGone:  # the upstream call was given up with it: the provider stops generating
        return Response(status_code=499), "client_disconnected"
    progress.stage = "answer"
    try:
        if upstream.status_code >= 300:  # an error, or a redirect that is not followed (a 502)
            return await upstream_failure(provider, gateway, upstream), "upstream_error"
        # An upstream that ignores `stream` (some compatible servers) answers JSON: relayed as it
        # came, where reading it as events dropped it for a "closed before it finished" error.
        kind = upstream.headers.get("content-type", "").lower()
        answered_json = kind.startswith("application/json")
        if ready.body.get("stream") and not answered_json:
            return await _streamed(gateway, provider, upstream, ready, kind), "streamed"
        try:
            reading = functools.partial(_unless_gone, request)  # the answer's body is waited on too
            answer = await complete(
                gateway, provider, ready.prepared, upstream, request.is_disconnected, reading
            )
            return answer, "ok"
        except ClientGone:  # nobody reads this answer (its body may have been given up half-read)
            await upstream.aclose()
            return Response(status_code=499), "client_disconnected"
    except BaseException:  # no answer made: its upstream connection is not left open
        await upstream.aclose()
        raise


async def _streamed(
    gateway: Gateway, provider: Provider, upstream: httpx.Response, ready: Outbound, kind: str
) -> Response:
    """The stream relayed as it arrives; one whose content type does not say events is looked at
    first (:func:`~.answers.not_events`): a portal's page with status 200 is a 502."""
    opened = None
    if kind and "event-stream" not in kind:
        try:
            opened = await opening(upstream)
        except httpx.HTTPError as exc:  # it stalled or dropped before its first line: a 504 or 502
            raise gateway.unread(upstream, exc) from exc
        if fault := not_events(gateway, upstream, kind, opened[0]):
            await upstream.aclose()
            raise fault
    return relay(gateway, provider, ready.prepared, upstream, ready.usage_added, opened)


async def _unless_usage_refused(
    request: Request,
    gateway: Gateway,
    provider: Provider,
    upstream: httpx.Response,
    ready: Outbound,
    headers: list[tuple[bytes, bytes]],
) -> tuple[httpx.Response, Outbound]:
    """A stream refused (400) for the ``stream_options`` the gateway added to learn its usage (the
    client sent none) is sent again without them, and its turn stored without usage; any other
    400 stands. Azure OpenAI before its 2024-09-01 API versions refuses the field: every stream
    through the gateway failed where the client's own request went. Each such stream is tried
    with the ask first (a 400 is quick): a refusal is not taken for another deployment's."""
    try:
        body = await gateway.read_answer(upstream)
    except BaseException:
        await upstream.aclose()
        raise
    if b"stream_options" not in body:
        return upstream, ready  # its body read: the failure is answered from it
    await upstream.aclose()
    logger.info("the upstream refused stream_options: the stream is sent without, its usage unknown")
    ready = await run_in_threadpool(functools.partial(rendered, provider, ready, ask_usage=False))
    assert ready.content is not None
    sending = gateway.send(provider, ready.content, headers, request.url.query)
    return await _unless_gone(request, sending), ready


async def _unless_gone(request: Request, sending: Awaitable[T], sent: asyncio.Event | None = None) -> T:
    """What ``sending`` gives (the upstream's answer, or its body), or :class:`ClientGone` once the
    client disconnects first: the call is cancelled (its connection closed). A client whose SDK timed out left a
    non-streamed call running upstream until it answered (billed, then dropped), and its retry
    started a second one. The request's body was read whole: the next message the server gives is
    its disconnect, awaited by a watcher that cancels this task (one task a request: 20 us, where
    racing the call in a task of its own took 55). ``sent``: the body is still being sent (a
    pass-through streams it) until it is set, and only then is the disconnect watched for."""
    task = asyncio.current_task()
    assert task is not None
    state = {"done": False, "gone": False}

    def leave(watch: asyncio.Future[None]) -> None:
        if state["done"] or watch.cancelled() or watch.exception() is not None:
            return
        state["gone"] = True
        task.cancel()

    watch = asyncio.ensure_future(_disconnected(request, sent))
    watch.add_done_callback(leave)
    try:
        return await sending
    except asyncio.CancelledError:
        if not state["gone"]:
            raise
        task.uncancel()
        raise ClientGone from None
    finally:
        state["done"] = True
        watch.cancel()


async def _disconnected(request: Request, sent: asyncio.Event | None = None) -> None:
    """Returns when the client disconnects (watched once ``sent`` is set: the body read whole)."""
    if sent is not None:
        await sent.wait()
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _internal_error(
    gateway: Gateway, provider: Provider, progress: Progress, exc: BaseException
) -> tuple[Response, str]:
    """Never a bare 500: an error in the provider's shape, logged and counted, and its code (call
    it while handling ``exc``, so the log has its traceback)."""
    stage = progress.stage
    gateway.note_internal_error(stage)
    logger.exception("request=%d failed while %s", progress.rid, stage)
    before = stage in ("read", "prepare", "send")
    status, code = (400, "invalid_request") if before else (502, "upstream_error")
    message = f"ctxbudget: {type(exc).__name__} while {stage}" + ("; nothing was sent" if before else "")
    return error_response(provider, status, message, code), code


def _named(response: Response, progress: Progress) -> None:
    """Every answer tells what the gateway did with the request, and once the body was read,
    names its session."""
    if progress.prepared is not None:
        for key, value in progress.prepared.headers().items():
            response.headers.setdefault(key, value)
    if progress.session:
        response.headers.setdefault(SESSION_HEADER, header_value(progress.session))


def _proxy(provider: Provider) -> Handler:
    """The handler of ``provider``'s API: forward, and answer every failure in its shape."""

    async def handler(request: Request) -> Response:
        gateway: Gateway = request.app.state.gateway
        progress = Progress(gateway.next_request_id(), time.perf_counter())
        try:
            response, outcome = await _forward(request, gateway, provider, progress)
        except Refusal as refusal:
            response, outcome = refused(provider, refusal), refusal.code
        except ClientDisconnect:  # nobody to answer
            response, outcome = Response(status_code=499), "client_disconnected"
        except StoreError as exc:  # read while preparing (policy mode's previous turn)
            response, outcome = refused(provider, gateway.store_failed(exc)), "store_unavailable"
        except BaseException as exc:  # a plug-in tokenizer's panic, too: never a bare 500
            if not is_error(exc):
                raise
            response, outcome = _internal_error(gateway, provider, progress, exc)
        _named(response, progress)
        gateway.note_request(provider.path, outcome)
        _log(provider, progress, response, outcome)
        return response

    return handler


COUNT_PATH = "/v1/messages/count_tokens"


async def _count_tokens(request: Request) -> Response:
    """Anthropic's count_tokens, answered by the gateway (calibrated estimate where not exact);
    counted by outcome in the metrics, and naming its session (when its name is one), as every
    route's answer."""
    gateway: Gateway = request.app.state.gateway
    progress = Progress(gateway.next_request_id(), time.perf_counter())
    response, outcome = await _counted(request, gateway, progress)
    if progress.session:
        response.headers.setdefault(SESSION_HEADER, header_value(progress.session))
    gateway.note_request(COUNT_PATH, outcome)
    return response


async def _counted(request: Request, gateway: Gateway, progress: Progress) -> tuple[Response, str]:
    """:func:`_count_tokens`'s answer and its outcome."""
    try:
        gateway.settings_for(request.headers)  # its X-Ctxbudget-* headers checked as every route's
        if (named := request.headers.get(SESSION_HEADER)) is not None:
            progress.session = named_session(named)  # a name the other routes refuse is refused here too
        body = await read_json(request, gateway)
        result = await run_in_threadpool(gateway.count_tokens, body)
    except SettingsError as exc:
        return error_response(ANTHROPIC, 400, f"ctxbudget: {exc}", "invalid_request"), "invalid_request"
    except Refusal as refusal:
        return refused(ANTHROPIC, refusal), refusal.code
    except CtxBudgetError as exc:
        return error_response(ANTHROPIC, 400, f"ctxbudget: {exc}", "invalid_request"), "invalid_request"
    except ClientDisconnect:
        return Response(status_code=499), "client_disconnected"
    except BaseException as exc:  # never a bare 500 (a plug-in tokenizer's panic neither)
        if not is_error(exc):
            raise
        gateway.note_internal_error("count")
        logger.exception("count_tokens failed")
        message = f"ctxbudget: {type(exc).__name__} while counting"
        return error_response(ANTHROPIC, 400, message, "invalid_request"), "invalid_request"
    keys = ("exact", "safety_factor", "encoding")
    return JSONResponse({"input_tokens": result["tokens"], **{k: result[k] for k in keys}}), "ok"


async def _healthz(request: Request) -> Response:
    """Liveness and the store: 200 while it serves, 503 with the cause while it does not."""
    gateway: Gateway = request.app.state.gateway
    failure = await gateway.check_store()
    if failure is None:
        return JSONResponse({"status": "ok", "store": "ok"})
    if gateway.config.store_fail_open:  # the replica serves: keep it in the balancer's rotation
        return JSONResponse({"status": "ok", "store": f"{failure}; failing open"})
    return JSONResponse({"status": "unavailable", "store": str(failure)}, status_code=503)


async def _metrics(request: Request) -> Response:
    """The Prometheus text of the gateway's metrics."""
    gateway: Gateway = request.app.state.gateway
    return PlainTextResponse(gateway.metrics_text(), media_type="text/plain; version=0.0.4")


def _provider_of(request: Request) -> Provider:
    """The API a request not served here meant: by its path (``/messages`` is Anthropic's,
    ``/chat/`` and ``/responses`` OpenAI's), else by its headers (Anthropic's SDK sends
    ``anthropic-version``), else OpenAI's, whose shape most compatible tools read (``GET
    /v1/models`` at start-up)."""
    path = request.url.path
    if "/chat/" in path or "/responses" in path:
        return OPENAI
    if "/messages" in path or "anthropic-version" in request.headers:
        return ANTHROPIC
    return OPENAI


_SERVED = "POST /v1/messages, POST /v1/messages/count_tokens, POST /v1/chat/completions, POST /v1/responses"


async def _unrouted(request: Request) -> Response:
    """Any other path or method: passed through to the upstream when the gateway is configured so
    and the path is an API's (``/v1/...``), else an error in the shape of the API it meant."""
    gateway: Gateway = request.app.state.gateway
    if gateway.config.pass_through and request.url.path.startswith("/v1/"):
        started = time.perf_counter()
        response, outcome = await _passed_through(gateway, request)
        gateway.note_request("/v1/* passed through", outcome)
        logger.info(  # its INFO line, as a fitted request has (method and path: no body is read)
            "request=%d passed_through=%s %s status=%d outcome=%s ms=%.1f",
            gateway.next_request_id(),
            request.method,
            request.url.path[:200],
            response.status_code,
            outcome,
            (time.perf_counter() - started) * 1000,
        )
        return response
    provider = _provider_of(request)
    message = (
        f"ctxbudget: {request.method} {request.url.path} is not served here; the gateway serves {_SERVED}"
        + ("" if gateway.config.pass_through else " (serve --pass-through sends other /v1/ paths upstream)")
    )
    return error_response(provider, 404, message, "not_found")


async def _passed_through(gateway: Gateway, request: Request) -> tuple[Response, str]:
    """A pass-through and its outcome; every failure in the upstream API's shape, never a bare 500."""
    provider = passed_to(request)
    try:
        response: Response = await pass_through(gateway, request, functools.partial(_unless_gone, request))
        return response, "ok" if response.status_code < 400 else "upstream_error"
    except Refusal as refusal:
        return refused(provider, refusal), refusal.code
    except (ClientDisconnect, ClientGone):  # nobody to answer (the upstream call was given up with it)
        return Response(status_code=499), "client_disconnected"
    except Exception as exc:
        progress = Progress(gateway.next_request_id(), time.perf_counter())
        progress.stage = "send"
        return _internal_error(gateway, provider, progress, exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own answers (405 for a method no route takes on a served path: OPTIONS,
    TRACE) in the API's error shape, with their headers (``Allow``)."""
    assert isinstance(exc, HTTPException)
    message = f"ctxbudget: {request.method} {request.url.path}: {exc.detail}; the gateway serves {_SERVED}"
    code = "method_not_allowed" if exc.status_code == 405 else "not_found"
    response = error_response(_provider_of(request), exc.status_code, message, code)
    response.headers.update(exc.headers or {})
    return response


def create_app(
    config: GatewayConfig,
    transport: httpx.AsyncBaseTransport | None = None,
    store: SessionStore | None = None,
    clock: Callable[[], float] = time.monotonic,
    *,
    freeze_heap: bool = False,
) -> Starlette:
    """The gateway as an ASGI app (``transport`` lets tests route upstream calls in-process;
    ``store``, a store other than the configured one; ``clock``, the monotonic seconds the
    provider's cache entries age by). Its start-up warms what the first request would pay for
    (:mod:`.warmup`); with ``freeze_heap`` (``ctxbudget serve``, which owns its process, and starts
    one app) it then freezes the heap out of the cycle collector's passes."""
    gateway = Gateway(config, transport, store, clock=clock)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if config.fast_tokenizer:  # before the first request: the load holds the GIL for about 1 s
            fast = await run_in_threadpool(functools.partial(use_fast_tokenizers, required=True))
            logger.info("tokenizer: quicktok (%s)", ", ".join(fast))
        await warmed(gateway.catalog)
        if freeze_heap:
            settle_heap()
        yield
        await run_in_threadpool(gateway.close)  # every answered turn committed before the process ends

    app = Starlette(
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
        routes=[
            Route("/v1/messages", _proxy(ANTHROPIC), methods=["POST"]),
            Route(COUNT_PATH, _count_tokens, methods=["POST"]),
            Route("/v1/chat/completions", _proxy(OPENAI), methods=["POST"]),
            Route("/v1/responses", _proxy(RESPONSES), methods=["POST"]),
            Route("/healthz", _healthz, methods=["GET"]),
            Route("/metrics", _metrics, methods=["GET"]),
            Route(
                "/{path:path}",
                _unrouted,
                methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
            ),
        ],
    )
    app.state.gateway = gateway
    return app
