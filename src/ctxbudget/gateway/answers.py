"""The client's answer, in the provider's shape: the gateway's own errors, the upstream's answer
whole or streamed through as it arrives, and the upstream's errors as they came.

An answered turn is handed to the store's writer, and the client gets the answer's end only once
the turn is stored; a turn the store could not take withholds the answer (a 503, or an error event
at the end of a stream) unless the gateway fails open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from starlette.responses import JSONResponse, Response, StreamingResponse

from .prepared import Prepared
from .providers import Provider, StreamState, failed_answer
from .refusals import Refusal
from .service import Gateway
from .tools import answered_calls
from .upstream import passed_back

logger = logging.getLogger("ctxbudget.gateway")

__all__ = ["complete", "error_response", "not_events", "opening", "refused", "relay", "upstream_failure"]


def error_response(provider: Provider, status: int, message: str, code: str) -> JSONResponse:
    """An error in the provider's own shape."""
    return JSONResponse(provider.error_body(status, message, code), status_code=status)


_BODY_HEADERS = ("content-type", "content-length", "content-encoding", "transfer-encoding")


def refused(provider: Provider, refusal: Refusal) -> JSONResponse:
    """A refusal told in the provider's shape, with what the client is told about its request."""
    response = error_response(provider, refusal.status, str(refusal), refusal.code)
    # the upstream's headers told with it never describe this body (a portal's text/html, say)
    response.headers.update({k: v for k, v in refusal.headers.items() if k.lower() not in _BODY_HEADERS})
    return response


async def upstream_failure(provider: Provider, gateway: Gateway, response: httpx.Response) -> Response:
    """The upstream's error answered as it came: its status (429, 503, 529 stay what they are),
    its rate-limit and retry headers, and its body when that is JSON (else the provider's shape).
    A redirect is a 502 naming it: it is not followed (a request is not sent twice), and an SDK
    given a 3xx without its ``Location`` could do nothing with it."""
    body = await gateway.read_answer(response)  # a body that stalls or is cut off: a 504 or 502
    status = response.status_code
    if status < 400:
        gateway.note_upstream_error("redirect")
        target = response.headers.get("location", "nowhere")
        message = (
            f"upstream answered {status}, a redirect to {target[:200]}: the gateway does not follow "
            f"redirects; check --{provider.name}-upstream (its scheme, host and path)"
        )
        return JSONResponse(provider.error_body(502, message, "upstream_error"), 502)
    if status >= 500:
        gateway.note_upstream_error(f"http_{status}")
    headers = {k: v for k, v in passed_back(response.headers).items() if k.lower() != "content-type"}
    try:
        json.loads(body)
    except RecursionError:  # JSON nested past what Python reads: passed on as it came
        pass
    except ValueError:
        snippet = body[:200].decode("utf-8", "replace")
        message = f"upstream answered {status}: {snippet}"
        return JSONResponse(provider.error_body(status, message, "upstream_error"), status, headers)
    return Response(body, status_code=status, headers=headers, media_type="application/json")


async def opening(response: httpx.Response) -> tuple[bytes, AsyncIterator[bytes]]:
    """The first bytes of a streamed answer (up to its first line end, or the stream's end) and an
    iterator of the rest, so a stream whose content type does not say events can be looked at
    before it is relayed as it arrives (nothing waits for the whole answer)."""
    chunks = response.aiter_bytes()
    head = b""
    try:
        async for chunk in chunks:
            head += chunk
            if b"\n" in head or b"\r" in head or len(head) >= 512:
                break
    except BaseException:
        await response.aclose()
        raise
    return head, chunks


def not_events(gateway: Gateway, response: httpx.Response, kind: str, head: bytes) -> Refusal | None:
    """For a streamed request answered with a content type other than events or JSON: None when
    its first bytes ``head`` read as events (a server that labels its stream ``text/plain``: it is
    relayed), else a 502 naming what came (a captive portal's or a proxy's page with status 200;
    nothing is stored). Relayed as events, such a page ended in "upstream closed the stream before
    it finished", which sent the user looking at the network instead of at ``--*-upstream``."""
    if _EVENT_LINE.match(head):
        return None
    snippet = " ".join(head[:120].decode("utf-8", "replace").split())
    message = (
        f"upstream answered {response.status_code} with {kind.split(';')[0].strip()} to a streamed "
        f"request, not an event stream ({snippet!r}); check the upstream's address"
    )
    return gateway.upstream_fault(response, 502, "not_events", message, "upstream_error")


# A body whose first line is a server-sent event's field or comment (after any blank lines).
_EVENT_LINE = re.compile(rb"\s*(?:data|event|id|retry)?:")


class ClientGone(Exception):
    """The client left before its whole answer came: it is not stored (nobody received it)."""


async def complete(
    gateway: Gateway,
    provider: Provider,
    prepared: Prepared,
    upstream: httpx.Response,
    gone: Callable[[], Awaitable[bool]] | None = None,
    reading: Callable[[Awaitable[bytes]], Awaitable[bytes]] | None = None,
) -> Response:
    """A whole (non-streamed) answer, recorded, then passed to the client with its headers;
    :class:`ClientGone` when ``gone`` says the client left meanwhile (an SDK's timeout): the turn
    is not stored, as a stream left half-way is not (its retry would be stored again). The body is
    read through ``reading`` (the route's: given up once the client is gone), the turn's commit
    never is."""
    read = gateway.read_answer(upstream)
    data = await (reading(read) if reading is not None else read)
    try:
        payload: Any = json.loads(data)
    except RecursionError:  # nested past what Python reads: passed on as it came, its text unread
        payload = None
    except ValueError as exc:
        message = f"upstream answered {upstream.status_code} with invalid JSON"
        raise gateway.upstream_fault(upstream, 502, "invalid_json", message, "upstream_error") from exc
    answer = provider.response_text(payload) if isinstance(payload, dict) else ""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    headers = {**passed_back(upstream.headers), **prepared.headers()}
    response = Response(data, status_code=upstream.status_code, headers=headers)  # before the turn is kept
    if gone is not None and await gone():
        logger.warning("session=%s client left before its answer: the turn is not stored", prepared.session)
        raise ClientGone
    if failed_answer(provider, payload):  # passed on as it came; no answered turn to store
        gateway.note_upstream_error("failed_response")
        logger.warning("session=%s the upstream failed the turn: it is not stored", prepared.session)
        return response
    calls = answered_calls(provider.input_format, payload)
    if reading is None:
        await gateway.answered(provider, prepared, answer, usage, calls)
        return response
    # The commit may wait for the store's lock (another process writing): a client that leaves
    # meanwhile gets no stored turn, as it gets none when it leaves before (its retry is the turn).
    abandoned = threading.Event()
    answering = asyncio.ensure_future(gateway.answered(provider, prepared, answer, usage, calls, abandoned))
    try:
        await reading(asyncio.shield(answering))  # type: ignore[arg-type]  # awaited for its end
    except ClientGone:
        abandoned.set()
        with contextlib.suppress(Exception):  # a refusal nobody will read
            await answering
        raise
    return response


def relay(
    gateway: Gateway,
    provider: Provider,
    prepared: Prepared,
    upstream: httpx.Response,
    usage_added: bool,
    opened: tuple[bytes, AsyncIterator[bytes]] | None = None,
) -> StreamingResponse:
    """Stream the answer through as it arrives (``opened``: its first bytes already read, and the
    rest); with ``usage_added`` (the gateway asked an OpenAI upstream for usage the client did not
    ask for), the usage-only chunk is held back."""
    state = StreamState(provider, hold_usage=usage_added)
    events = _events(gateway, provider, prepared, upstream, state, opened)
    headers = {"cache-control": "no-cache", **passed_back(upstream.headers), **prepared.headers()}
    headers.pop("content-type", None)
    return StreamingResponse(events, status_code=200, media_type="text/event-stream", headers=headers)


async def _record(gateway: Gateway, provider: Provider, prepared: Prepared, state: StreamState) -> bytes:
    """Store the streamed turn: nothing to add when it is stored, else the error event that
    takes the place of the stream's end. A client that leaves while the commit waits for the
    store's lock (the stream is cancelled) gets no stored turn, as :func:`complete`'s does not."""
    abandoned = threading.Event()
    text, calls = "".join(state.text), state.calls.calls()
    answering = asyncio.ensure_future(
        gateway.answered(provider, prepared, text, state.usage, calls, abandoned)
    )
    answering.add_done_callback(_retrieved)
    try:
        await asyncio.shield(answering)
    except asyncio.CancelledError:
        abandoned.set()
        raise
    except Refusal as refusal:
        return provider.stream_error(str(refusal), refusal.status, refusal.code)
    return b""


def _retrieved(task: asyncio.Future[None]) -> None:
    """A commit's outcome taken, so that one nobody awaits any more (its client left) is not
    logged as an exception never retrieved."""
    if not task.cancelled():
        task.exception()


async def _events(
    gateway: Gateway,
    provider: Provider,
    prepared: Prepared,
    upstream: httpx.Response,
    state: StreamState,
    opened: tuple[bytes, AsyncIterator[bytes]] | None = None,
) -> AsyncIterator[bytes]:
    """The stream's events as they arrive; the turn is stored before the client sees the end
    (an error event in its place when it could not be), and a stream dropped or truncated before
    its end ends with an error event (a drop after it is none of the client's concern)."""
    recorded = False
    try:
        head, chunks = opened if opened is not None else (b"", upstream.aiter_bytes())
        async for chunk in _after(head, chunks):
            out = state.feed(chunk)
            if state.finished and not recorded:  # stored before the client sees the end
                recorded = True
                failure = await _record(gateway, provider, prepared, state)
                if failure:
                    yield failure
                    return
            if out:
                yield out
    except httpx.HTTPError as exc:
        if recorded:  # after the stream's end: the client has the whole answer, and it is stored
            if tail := state.flush():
                yield tail
            return
        if isinstance(exc, httpx.TimeoutException):  # stalled past --timeout, not dropped
            _ended_early(gateway, prepared, "timeout")
            yield provider.stream_error(
                f"the upstream's stream stalled past the gateway's timeout: {type(exc).__name__}",
                504,
                "upstream_timeout",
            )
            return
        _ended_early(gateway, prepared, "disconnected")
        yield provider.stream_error(f"upstream dropped the stream: {type(exc).__name__}")
        return
    except (asyncio.CancelledError, GeneratorExit):
        if not recorded:  # the stream's access line, written as it began, says only "streamed"
            logger.warning(
                "session=%s status=499 outcome=client_disconnected: the stream was cancelled before "
                "its end (its client left, or the server is stopping): the upstream call is closed "
                "and the turn is not stored",
                prepared.session,
            )
        raise
    finally:
        await upstream.aclose()
    tail = state.flush()
    if state.finished and not recorded:
        failure = await _record(gateway, provider, prepared, state)
        if failure:
            yield failure
            return
    if tail:
        yield tail
    if recorded:  # an error or bad data after the end the turn was stored at: the client has it
        return
    if not state.finished and (state.failed or state.broken):  # passed on: the client's SDK raised
        _ended_early(gateway, prepared, "stream_error" if state.failed else "invalid_event")
    elif not state.finished:
        _ended_early(gateway, prepared, "truncated_stream")
        yield provider.stream_error("upstream closed the stream before it finished")


async def _after(head: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``head``, then what ``chunks`` still holds."""
    if head:
        yield head
    async for chunk in chunks:
        yield chunk


def _ended_early(gateway: Gateway, prepared: Prepared, kind: str) -> None:
    """A stream that ended without its answer: counted and logged (the request's access line,
    written when the stream began, says only that it was streamed)."""
    gateway.note_upstream_error(kind)
    logger.warning("session=%s stream ended without its answer: %s", prepared.session, kind)
