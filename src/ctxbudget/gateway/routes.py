"""The HTTP routes: thin handlers that read, call the gateway, and answer in the provider's shape."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import CtxBudgetError
from ..fitting import count
from .app import DROPPED_HEADERS, PASSED_BACK_HEADERS, Gateway, Prepared, Refusal, _session_id
from .config import GatewayConfig
from .providers import ANTHROPIC, OPENAI, Provider, StreamState

__all__ = ["create_app"]

logger = logging.getLogger("ctxbudget.gateway")


async def _read_json(request: Request, gateway: Gateway) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    limit = gateway.config.max_body_bytes
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
        body = json.loads(data)
    except ValueError as exc:
        raise Refusal(400, f"request body is not valid JSON: {exc}", "invalid_json") from exc
    if not isinstance(body, dict):
        raise Refusal(400, "request body must be a JSON object", "invalid_request")
    return body


def _forward_headers(request: Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.lower() not in DROPPED_HEADERS}


def _error(provider: Provider, status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse(provider.error_body(status, message, code), status_code=status)


def _log(
    rid: int,
    provider: Provider,
    prepared: Prepared | None,
    size: int,
    status: int,
    outcome: str,
    started: float,
) -> None:
    tokens = f"{prepared.report['tokens_before']}->{prepared.report['tokens_after']}" if prepared else "-"
    session = prepared.session if prepared else "-"
    logger.info(
        "request=%d api=%s session=%s bytes=%d tokens=%s status=%d outcome=%s ms=%.1f",
        rid,
        provider.name,
        session,
        size,
        tokens,
        status,
        outcome,
        (time.perf_counter() - started) * 1000,
    )


async def _upstream_failure(provider: Provider, gateway: Gateway, response: httpx.Response) -> Response:
    body = await response.aread()
    if response.status_code < 500:  # the provider's own 4xx answer, passed through as it is
        return Response(
            body, status_code=response.status_code, media_type=response.headers.get("content-type")
        )
    gateway.metrics.upstream_errors.labels(f"http_{response.status_code}").inc()
    snippet = body[:200].decode("utf-8", "replace")
    return _error(provider, 502, f"upstream answered {response.status_code}: {snippet}", "upstream_error")


async def _send(
    gateway: Gateway, provider: Provider, prepared: Prepared, headers: dict[str, str]
) -> httpx.Response:
    request = gateway.client.build_request(
        "POST", gateway.upstream(provider), headers=headers, content=json.dumps(prepared.body).encode("utf-8")
    )
    try:
        return await gateway.client.send(request, stream=True)
    except httpx.TimeoutException as exc:
        gateway.metrics.upstream_errors.labels("timeout").inc()
        raise Refusal(504, f"upstream timed out: {type(exc).__name__}", "upstream_timeout") from exc
    except httpx.HTTPError as exc:
        gateway.metrics.upstream_errors.labels("connection").inc()
        raise Refusal(502, f"upstream unreachable: {type(exc).__name__}", "upstream_unreachable") from exc


async def _complete(
    gateway: Gateway, provider: Provider, prepared: Prepared, upstream: httpx.Response
) -> Response:
    try:
        data = await upstream.aread()
    except httpx.HTTPError as exc:
        gateway.metrics.upstream_errors.labels("disconnected").inc()
        raise Refusal(
            502, f"upstream dropped the connection: {type(exc).__name__}", "upstream_disconnected"
        ) from exc
    finally:
        await upstream.aclose()
    payload = json.loads(data)
    await gateway.record(provider, prepared, provider.response_text(payload), payload.get("usage"))
    headers = {k: v for k, v in upstream.headers.items() if k.lower() in PASSED_BACK_HEADERS}
    return Response(data, status_code=upstream.status_code, headers=headers)


def _relay(
    gateway: Gateway, provider: Provider, prepared: Prepared, upstream: httpx.Response
) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        state = StreamState(provider)
        try:
            async for chunk in upstream.aiter_bytes():
                state.feed(chunk)
                yield chunk
        except httpx.HTTPError as exc:
            gateway.metrics.upstream_errors.labels("disconnected").inc()
            yield provider.stream_error(f"upstream dropped the stream: {type(exc).__name__}")
            return
        finally:
            await upstream.aclose()
        if not state.finished:
            gateway.metrics.upstream_errors.labels("truncated_stream").inc()
            yield provider.stream_error("upstream closed the stream before it finished")
            return
        await gateway.record(provider, prepared, "".join(state.text), state.usage)

    return StreamingResponse(
        events(), status_code=200, media_type="text/event-stream", headers={"cache-control": "no-cache"}
    )


def _proxy(provider: Provider) -> Any:
    async def handler(request: Request) -> Response:
        gateway: Gateway = request.app.state.gateway
        rid, started, prepared, size = gateway.next_request_id(), time.perf_counter(), None, 0
        try:
            body = await _read_json(request, gateway)
            size = len(json.dumps(body))
            prepared = await run_in_threadpool(
                gateway.prepare, provider, body, _session_id(request, provider, body)
            )
            upstream = await _send(gateway, provider, prepared, _forward_headers(request))
            if upstream.status_code >= 400:
                response = await _upstream_failure(provider, gateway, upstream)
                outcome = "upstream_error"
            elif body.get("stream"):
                response, outcome = _relay(gateway, provider, prepared, upstream), "streamed"
            else:
                response, outcome = await _complete(gateway, provider, prepared, upstream), "ok"
        except Refusal as refusal:
            response, outcome = _error(provider, refusal.status, str(refusal), refusal.code), refusal.code
        gateway.metrics.requests.labels(provider.path, outcome).inc()
        _log(rid, provider, prepared, size, response.status_code, outcome, started)
        return response

    return handler


async def _count_tokens(request: Request) -> Response:
    gateway: Gateway = request.app.state.gateway
    try:
        body = await _read_json(request, gateway)
        model = str(body.get("model", ""))
        catalog = gateway.catalog_for(model)[0]
        result = await run_in_threadpool(
            count,
            body,
            model=model,
            format="anthropic",
            catalog=catalog,
            unknown_model=gateway.config.unknown_model,
        )
    except Refusal as refusal:
        return _error(ANTHROPIC, refusal.status, str(refusal), refusal.code)
    except CtxBudgetError as exc:
        return _error(ANTHROPIC, 400, f"ctxbudget: {exc}", "invalid_request")
    gateway.metrics.requests.labels("/v1/messages/count_tokens", "ok").inc()
    return JSONResponse(
        {
            "input_tokens": result["tokens"],
            "exact": result["exact"],
            "safety_factor": result["safety_factor"],
            "encoding": result["encoding"],
        }
    )


async def _healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _metrics(request: Request) -> Response:
    gateway: Gateway = request.app.state.gateway
    return PlainTextResponse(gateway.metrics.render(), media_type="text/plain; version=0.0.4")


def create_app(config: GatewayConfig, transport: httpx.AsyncBaseTransport | None = None) -> Starlette:
    """The gateway as an ASGI app (``transport`` lets tests route upstream calls in-process)."""
    gateway = Gateway(config, transport)
    app = Starlette(
        routes=[
            Route("/v1/messages", _proxy(ANTHROPIC), methods=["POST"]),
            Route("/v1/messages/count_tokens", _count_tokens, methods=["POST"]),
            Route("/v1/chat/completions", _proxy(OPENAI), methods=["POST"]),
            Route("/healthz", _healthz, methods=["GET"]),
            Route("/metrics", _metrics, methods=["GET"]),
        ]
    )
    app.state.gateway = gateway
    return app
