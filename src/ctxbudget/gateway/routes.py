"""The HTTP routes: thin handlers that read, call the gateway, and answer in the provider's shape."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..catalog.catalog import MAX_SAFETY_FACTOR
from ..errors import CtxBudgetError, InvalidRequestError
from ..formats.jsonvalue import decode_json
from .answers import complete, error_response, refused, relay, upstream_failure
from .bodies import session_id, with_stream_usage
from .config import GatewayConfig
from .prepared import Prepared
from .providers import ANTHROPIC, OPENAI, Provider
from .refusals import Refusal
from .service import Gateway
from .settings import SESSION_HEADER, RequestSettings, SettingsError
from .upstream import forwarded_headers

__all__ = ["create_app"]

logger = logging.getLogger("ctxbudget.gateway")
Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class _Progress:
    """How far one proxied request got: what its log line, its error and its headers name."""

    rid: int
    started: float
    stage: str = "read"
    size: int = 0
    session: str = ""
    prepared: Prepared | None = None


async def _read_json(request: Request, gateway: Gateway) -> dict[str, Any]:
    """The request's JSON object, read up to the gateway's body limit (413 beyond it)."""
    declared = request.headers.get("content-length")
    limit = gateway.body_limit()
    if declared and declared.isdigit() and int(declared) > limit:
        raise Refusal(
            413,
            f"request body of {int(declared):,} bytes is over the {limit:,}-byte limit",
            "request_too_large",
        )
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise Refusal(413, f"request body is over the {limit:,}-byte limit", "request_too_large")
    try:
        body = decode_json(data, "request body")
    except InvalidRequestError as exc:
        raise Refusal(400, str(exc), "invalid_json") from exc
    if not isinstance(body, dict):
        raise Refusal(400, "request body must be a JSON object", "invalid_request")
    return body


def _settings(gateway: Gateway, request: Request) -> RequestSettings:
    """The request's budgets; a malformed ctxbudget header is bad input."""
    try:
        return gateway.settings_for(request.headers)
    except SettingsError as exc:
        raise Refusal(400, f"ctxbudget: {exc}", "invalid_request") from exc


def _log(provider: Provider, progress: _Progress, status: int, outcome: str) -> None:
    """The request's one INFO line."""
    prepared = progress.prepared
    tokens = f"{prepared.report['tokens_before']}->{prepared.report['tokens_after']}" if prepared else "-"
    session = prepared.session if prepared else "-"
    logger.info(
        "request=%d api=%s session=%s bytes=%d tokens=%s status=%d outcome=%s ms=%.1f",
        progress.rid,
        provider.name,
        session,
        progress.size,
        tokens,
        status,
        outcome,
        (time.perf_counter() - progress.started) * 1000,
    )


async def _prepare(
    gateway: Gateway,
    provider: Provider,
    request: Request,
    body: dict[str, Any],
    settings: RequestSettings,
    progress: _Progress,
) -> Prepared:
    """Fit (or assemble) the body; when the fit depends on the estimate, refit with the
    upstream's exact count of it (when it gives one)."""
    prepare = gateway.prepare
    prepared = await run_in_threadpool(prepare, provider, body, progress.session, settings)
    progress.prepared = prepared
    if gateway.depends_on_estimate(provider, prepared):
        proxy = prepared.proxy_before
        exact = await gateway.exact_count(body, forwarded_headers(request.headers.items()), proxy)
        factor = exact / max(1, proxy) if exact is not None else 0.0
        if 0 < factor <= MAX_SAFETY_FACTOR:  # else the upstream's count is not believable: keep the fit
            prepared = await run_in_threadpool(prepare, provider, body, progress.session, settings, factor)
            progress.prepared = prepared
    return prepared


async def _forward(
    request: Request, gateway: Gateway, provider: Provider, progress: _Progress
) -> tuple[Response, str]:
    """Read, prepare, send, and answer one request: the response and its outcome."""
    body = await _read_json(request, gateway)
    progress.size = len(json.dumps(body))
    progress.stage = "prepare"
    progress.session = session_id(request.headers.get(SESSION_HEADER), provider, body)
    settings = _settings(gateway, request)
    prepared = await _prepare(gateway, provider, request, body, settings, progress)
    forwarded, usage_added = with_stream_usage(provider, prepared.body)
    progress.stage = "send"
    headers = forwarded_headers(request.headers.items())
    upstream = await gateway.send(provider, forwarded, headers, request.url.query)
    progress.stage = "answer"
    if upstream.status_code >= 400:
        return await upstream_failure(provider, gateway, upstream), "upstream_error"
    if body.get("stream"):
        return relay(gateway, provider, prepared, upstream, usage_added), "streamed"
    return await complete(gateway, provider, prepared, upstream), "ok"


def _internal_error(
    gateway: Gateway, provider: Provider, progress: _Progress, exc: Exception
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


def _named(response: Response, progress: _Progress) -> None:
    """Every answer tells what the gateway did with the request, and once the body was read,
    names its session."""
    if progress.prepared is not None:
        for key, value in progress.prepared.headers().items():
            response.headers.setdefault(key, value)
    if progress.session:
        response.headers.setdefault(SESSION_HEADER, progress.session)


def _proxy(provider: Provider) -> Handler:
    """The handler of ``provider``'s API: forward, and answer every failure in its shape."""

    async def handler(request: Request) -> Response:
        gateway: Gateway = request.app.state.gateway
        progress = _Progress(gateway.next_request_id(), time.perf_counter())
        try:
            response, outcome = await _forward(request, gateway, provider, progress)
        except Refusal as refusal:
            response, outcome = refused(provider, refusal), refusal.code
        except ClientDisconnect:  # nobody to answer
            response, outcome = Response(status_code=499), "client_disconnected"
        except Exception as exc:
            response, outcome = _internal_error(gateway, provider, progress, exc)
        _named(response, progress)
        gateway.note_request(provider.path, outcome)
        _log(provider, progress, response.status_code, outcome)
        return response

    return handler


async def _count_tokens(request: Request) -> Response:
    """Anthropic's count_tokens, answered by the gateway (calibrated estimate where not exact)."""
    gateway: Gateway = request.app.state.gateway
    try:
        body = await _read_json(request, gateway)
        result = await run_in_threadpool(gateway.count_tokens, body)
    except Refusal as refusal:
        return refused(ANTHROPIC, refusal)
    except CtxBudgetError as exc:
        return error_response(ANTHROPIC, 400, f"ctxbudget: {exc}", "invalid_request")
    except ClientDisconnect:
        return Response(status_code=499)
    except Exception as exc:  # never a bare 500
        gateway.note_internal_error("count")
        logger.exception("count_tokens failed")
        message = f"ctxbudget: {type(exc).__name__} while counting"
        return error_response(ANTHROPIC, 400, message, "invalid_request")
    gateway.note_request("/v1/messages/count_tokens", "ok")
    keys = ("exact", "safety_factor", "encoding")
    return JSONResponse({"input_tokens": result["tokens"], **{k: result[k] for k in keys}})


async def _healthz(request: Request) -> Response:
    """Liveness."""
    return JSONResponse({"status": "ok"})


async def _metrics(request: Request) -> Response:
    """The Prometheus text of the gateway's metrics."""
    gateway: Gateway = request.app.state.gateway
    return PlainTextResponse(gateway.metrics_text(), media_type="text/plain; version=0.0.4")


async def _unrouted(request: Request) -> Response:
    """Any other path or method: an error in the shape of the API the path belongs to."""
    provider = OPENAI if "/chat/" in request.url.path or "/responses" in request.url.path else ANTHROPIC
    known = "POST /v1/messages, POST /v1/messages/count_tokens, POST /v1/chat/completions"
    message = f"ctxbudget: {request.method} {request.url.path} is not served here; the gateway serves {known}"
    return error_response(provider, 404, message, "not_found")


def create_app(config: GatewayConfig, transport: httpx.AsyncBaseTransport | None = None) -> Starlette:
    """The gateway as an ASGI app (``transport`` lets tests route upstream calls in-process)."""
    gateway = Gateway(config, transport)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await run_in_threadpool(gateway.close)  # every answered turn committed before the process ends

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/v1/messages", _proxy(ANTHROPIC), methods=["POST"]),
            Route("/v1/messages/count_tokens", _count_tokens, methods=["POST"]),
            Route("/v1/chat/completions", _proxy(OPENAI), methods=["POST"]),
            Route("/healthz", _healthz, methods=["GET"]),
            Route("/metrics", _metrics, methods=["GET"]),
            Route("/{path:path}", _unrouted, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]),
        ],
    )
    app.state.gateway = gateway
    return app
