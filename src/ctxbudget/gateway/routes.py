"""The HTTP routes: thin handlers that read, call the gateway, and answer in the provider's shape."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import CtxBudgetError, InvalidRequestError
from ..formats.jsonvalue import decode_json
from .app import DROPPED_HEADERS, Gateway, Prepared, Refusal, _session_id, passed_back
from .config import GatewayConfig
from .providers import ANTHROPIC, OPENAI, Provider, StreamState
from .settings import HEADER_PREFIX, RequestSettings, SettingsError

__all__ = ["create_app"]

logger = logging.getLogger("ctxbudget.gateway")


async def _read_json(request: Request, gateway: Gateway) -> dict[str, Any]:
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


def _forward_headers(request: Request) -> list[tuple[str, str]]:
    """The client's headers, as sent (a header given twice, such as ``anthropic-beta``, stays
    twice), less hop-by-hop ones and ctxbudget's own (never sent upstream)."""
    return [
        (k, v)
        for k, v in request.headers.items()
        if k.lower() not in DROPPED_HEADERS and not k.lower().startswith(HEADER_PREFIX)
    ]


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
    """The upstream's error answered as it came: its status (429, 503, 529 stay what they are),
    its rate-limit and retry headers, and its body when that is JSON (else the provider's shape)."""
    try:
        body = await response.aread()
    finally:
        await response.aclose()
    status = response.status_code
    if status >= 500:
        gateway.note_upstream_error(f"http_{status}")
    headers = {k: v for k, v in passed_back(response.headers).items() if k.lower() != "content-type"}
    try:
        json.loads(body)
    except ValueError:
        snippet = body[:200].decode("utf-8", "replace")
        message = f"upstream answered {status}: {snippet}"
        return JSONResponse(provider.error_body(status, message, "upstream_error"), status, headers)
    return Response(body, status_code=status, headers=headers, media_type="application/json")


async def _send(
    gateway: Gateway, provider: Provider, prepared: Prepared, headers: list[tuple[str, str]], query: str = ""
) -> httpx.Response:
    return await gateway.send(provider, prepared.body, headers, query)


def _upstream_fault(
    gateway: Gateway, upstream: httpx.Response, status: int, kind: str, message: str, code: str
) -> Refusal:
    """An upstream fault after it answered: counted, and told with the upstream's own headers."""
    gateway.note_upstream_error(kind)
    return Refusal(status, message, code, passed_back(upstream.headers))


async def _complete(
    gateway: Gateway, provider: Provider, prepared: Prepared, upstream: httpx.Response
) -> Response:
    try:
        data = await upstream.aread()
    except httpx.TimeoutException as exc:
        message = f"upstream timed out: {type(exc).__name__}"
        raise _upstream_fault(gateway, upstream, 504, "timeout", message, "upstream_timeout") from exc
    except httpx.HTTPError as exc:
        message = f"upstream dropped the connection: {type(exc).__name__}"
        raise _upstream_fault(
            gateway, upstream, 502, "disconnected", message, "upstream_disconnected"
        ) from exc
    finally:
        await upstream.aclose()
    try:
        payload = json.loads(data)
    except ValueError as exc:
        message = f"upstream answered {upstream.status_code} with invalid JSON"
        raise _upstream_fault(gateway, upstream, 502, "invalid_json", message, "upstream_error") from exc
    answer = provider.response_text(payload) if isinstance(payload, dict) else ""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    await gateway.record(provider, prepared, answer, usage)
    headers = {**passed_back(upstream.headers), **prepared.headers()}
    return Response(data, status_code=upstream.status_code, headers=headers)


def _relay(
    gateway: Gateway, provider: Provider, prepared: Prepared, upstream: httpx.Response, usage_added: bool
) -> StreamingResponse:
    """Stream the answer through as it arrives; with ``usage_added`` (the gateway asked an OpenAI
    upstream for usage the client did not ask for), the usage-only chunk is held back."""

    async def events() -> AsyncIterator[bytes]:
        state = StreamState(provider, hold_usage=usage_added)
        recorded = False
        try:
            async for chunk in upstream.aiter_bytes():
                out = state.feed(chunk)
                if state.finished and not recorded:  # recorded before the client sees the end
                    recorded = True
                    await gateway.record(provider, prepared, "".join(state.text), state.usage)
                if out:
                    yield out
        except httpx.HTTPError as exc:
            gateway.note_upstream_error("disconnected")
            yield provider.stream_error(f"upstream dropped the stream: {type(exc).__name__}")
            return
        finally:
            await upstream.aclose()
        tail = state.flush()
        if state.finished and not recorded:
            await gateway.record(provider, prepared, "".join(state.text), state.usage)
        if tail:
            yield tail
        if not state.finished:
            gateway.note_upstream_error("truncated_stream")
            yield provider.stream_error("upstream closed the stream before it finished")

    headers = {"cache-control": "no-cache", **passed_back(upstream.headers), **prepared.headers()}
    headers.pop("content-type", None)
    return StreamingResponse(events(), status_code=200, media_type="text/event-stream", headers=headers)


def _with_stream_usage(provider: Provider, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """An OpenAI stream asks for usage (so the turn can be recorded) when the client did not."""
    if provider.name != "openai" or not body.get("stream"):
        return body, False
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise Refusal(400, "ctxbudget: $.stream_options must be an object", "invalid_request")
    if isinstance(options, dict) and options.get("include_usage"):
        return body, False
    return {**body, "stream_options": {**(options or {}), "include_usage": True}}, True


def _proxy(provider: Provider) -> Any:
    async def handler(request: Request) -> Response:
        gateway: Gateway = request.app.state.gateway
        rid, started, prepared, size, stage = gateway.next_request_id(), time.perf_counter(), None, 0, "read"
        session = ""
        try:
            body = await _read_json(request, gateway)
            size = len(json.dumps(body))
            stage = "prepare"
            session = _session_id(request, provider, body)
            settings = _settings(gateway, request)
            prepared = await run_in_threadpool(gateway.prepare, provider, body, session, settings)
            if gateway.depends_on_estimate(provider, prepared):
                proxy = prepared.proxy_before
                exact = await gateway.exact_count(body, _forward_headers(request), proxy)
                if exact is not None:
                    factor = exact / max(1, proxy)
                    prepared = await run_in_threadpool(
                        gateway.prepare, provider, body, session, settings, factor
                    )
            forwarded, usage_added = _with_stream_usage(provider, prepared.body)
            stage = "send"
            upstream = await _send(
                gateway,
                provider,
                replace(prepared, body=forwarded),
                _forward_headers(request),
                request.url.query,
            )
            stage = "answer"
            if upstream.status_code >= 400:
                response = await _upstream_failure(provider, gateway, upstream)
                outcome = "upstream_error"
            elif body.get("stream"):
                response, outcome = _relay(gateway, provider, prepared, upstream, usage_added), "streamed"
            else:
                response, outcome = await _complete(gateway, provider, prepared, upstream), "ok"
        except Refusal as refusal:
            response, outcome = _error(provider, refusal.status, str(refusal), refusal.code), refusal.code
            response.headers.update(refusal.headers)
        except ClientDisconnect:  # nobody to answer
            response, outcome = Response(status_code=499), "client_disconnected"
        except Exception as exc:  # never a bare 500: an error in the provider's shape, logged and counted
            gateway.note_internal_error(stage)
            logger.exception("request=%d failed while %s", rid, stage)
            before = stage in ("read", "prepare", "send")
            status, code = (400, "invalid_request") if before else (502, "upstream_error")
            message = f"ctxbudget: {type(exc).__name__} while {stage}" + (
                "; nothing was sent" if before else ""
            )
            response, outcome = _error(provider, status, message, code), code
        if prepared is not None:
            for key, value in prepared.headers().items():
                response.headers.setdefault(key, value)
        if session:  # once the body was read, every answer names its session
            response.headers.setdefault("x-ctxbudget-session", session)
        gateway.note_request(provider.path, outcome)
        _log(rid, provider, prepared, size, response.status_code, outcome, started)
        return response

    return handler


def _settings(gateway: Gateway, request: Request) -> RequestSettings:
    try:
        return gateway.settings_for(request.headers)
    except SettingsError as exc:
        raise Refusal(400, f"ctxbudget: {exc}", "invalid_request") from exc


async def _count_tokens(request: Request) -> Response:
    gateway: Gateway = request.app.state.gateway
    try:
        body = await _read_json(request, gateway)
        result = await run_in_threadpool(gateway.count_tokens, body)
    except Refusal as refusal:
        return _error(ANTHROPIC, refusal.status, str(refusal), refusal.code)
    except CtxBudgetError as exc:
        return _error(ANTHROPIC, 400, f"ctxbudget: {exc}", "invalid_request")
    except ClientDisconnect:
        return Response(status_code=499)
    except Exception as exc:  # never a bare 500
        gateway.note_internal_error("count")
        logger.exception("count_tokens failed")
        return _error(ANTHROPIC, 400, f"ctxbudget: {type(exc).__name__} while counting", "invalid_request")
    gateway.note_request("/v1/messages/count_tokens", "ok")
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
    return PlainTextResponse(gateway.metrics_text(), media_type="text/plain; version=0.0.4")


async def _unrouted(request: Request) -> Response:
    """Any other path or method: an error in the shape of the API the path belongs to."""
    provider = OPENAI if "/chat/" in request.url.path or "/responses" in request.url.path else ANTHROPIC
    known = "POST /v1/messages, POST /v1/messages/count_tokens, POST /v1/chat/completions"
    message = f"ctxbudget: {request.method} {request.url.path} is not served here; the gateway serves {known}"
    return _error(provider, 404, message, "not_found")


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
            Route("/{path:path}", _unrouted, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]),
        ]
    )
    app.state.gateway = gateway
    return app
