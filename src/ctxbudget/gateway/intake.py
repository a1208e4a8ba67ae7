"""A proxied request from its bytes to the bytes sent upstream: read, parse once, prepare, render once.

The body is read as chunks joined once (appending to one ``bytes`` copies the whole body at every
chunk: quadratic on a 50 MB body) and decoded once. A body that goes on unchanged (a fit that
passed it through, nothing added) is sent as the client's own bytes, not written again (1.1 ms for
a 524 kB chat body); those bytes are held through the fit only up to ``FAST_JSON_BYTES`` (1 MiB),
and let go once the bytes to send are rendered: a larger body's are dropped once decoded, so they
do not add to its peak memory. Decoding, the fit and the rendering of what is forwarded run in one
worker thread for a large body (none of it then holds up the event loop); a small one is handled
on the event loop, where handing it to a thread and back costs more than the work (0.3-0.4 ms of
thread switches against 0.15 ms for a short chat body's fit).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..catalog.catalog import MAX_SAFETY_FACTOR
from ..errors import InvalidRequestError
from ..formats.jsonvalue import FAST_JSON_BYTES, decode_json
from ..session.store import SQLiteStore
from .bodies import encoded, named_session, session_id, with_stream_usage
from .prepared import Prepared
from .providers import Provider
from .refusals import Refusal
from .service import Gateway
from .settings import SESSION_HEADER, RequestSettings, SettingsError
from .upstream import forwarded_headers

__all__ = [
    "BODY_IDLE_SECONDS",
    "INLINE_BYTES",
    "Outbound",
    "Progress",
    "outbound",
    "read_body",
    "read_json",
    "timely",
]

# Bodies up to this size are parsed and fitted on the event loop (see the module docstring).
INLINE_BYTES = 16_384
T = TypeVar("T")


@dataclass
class Progress:
    """How far one proxied request got: what its log line, its error and its headers name."""

    rid: int
    started: float
    stage: str = "read"
    size: int = 0
    session: str = ""
    prepared: Prepared | None = None


@dataclass(frozen=True)
class Outbound:
    """A prepared request: the client's body, its budgets, the fit, and the bytes to send (None
    while an exact count may still change the fit)."""

    body: dict[str, Any]
    settings: RequestSettings
    prepared: Prepared
    content: bytes | None = None
    usage_added: bool = False  # an OpenAI stream was asked for usage the client did not ask for
    given: bytes | None = None  # the client's bytes of ``body``, when held (see the module docstring)


_BYTE_ORDER_MARK = b"\xef\xbb\xbf"  # read past by the reader; an upstream may refuse it


def held_bytes(data: bytes) -> bytes | None:
    """The client's bytes when they may be sent in place of the body's rendering."""
    return data if len(data) <= FAST_JSON_BYTES and not data.startswith(_BYTE_ORDER_MARK) else None


def sent_bytes(given: bytes | None, decoded: Mapping[str, Any], body: Mapping[str, Any]) -> bytes:
    """The bytes to send for ``body``: the client's own (``given``, which decode to ``decoded``)
    when ``body`` is that same JSON value (nothing trimmed, marked or added), else ``body``
    rendered (:func:`.bodies.encoded`)."""
    return given if given is not None and body == decoded else encoded(body)


def check_coding(headers: Mapping[str, str]) -> None:
    """A body in a content coding is not read (415: the provider APIs take JSON as it is). Every
    Content-Encoding header counts: with ``identity`` and then ``gzip`` the second was not read,
    and a gzip body was refused as JSON that is not UTF-8."""
    given = headers.getlist("content-encoding") if hasattr(headers, "getlist") else None
    listed = given if given is not None else [headers.get("content-encoding", "")]
    codings = [c.strip().lower() for value in listed for c in value.split(",")]
    coding = ", ".join(c for c in codings if c not in ("", "identity"))
    if coding:
        raise Refusal(
            415,
            f"request body in Content-Encoding {coding[:40]!r}: send it uncompressed (JSON as it is)",
            "unsupported_content_encoding",
        )


async def read_body(request: Request, gateway: Gateway) -> bytes:
    """The request's bytes, read up to the gateway's body limit (413 beyond it); a body in a
    content coding is not read (415: the provider APIs take JSON as it is)."""
    check_coding(request.headers)
    declared = request.headers.get("content-length")
    limit = gateway.body_limit()
    if declared and declared.isdigit() and int(declared) > limit:
        raise Refusal(413, _too_large(f"request body of {int(declared):,} bytes", limit), "request_too_large")
    chunks: list[bytes] = []
    size = 0
    async for chunk in timely(request.stream()):
        size += len(chunk)
        if size > limit:
            raise Refusal(413, _too_large("request body", limit), "request_too_large")
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _too_large(what: str, limit: int) -> str:
    """The 413's message: the gateway's limit, named as its own (a client read the provider's
    request_too_large in it) with the option that sets it."""
    return (
        f"ctxbudget: {what} is over the gateway's {limit:,}-byte limit "
        "(ctxbudget serve --max-body-bytes, GatewayConfig.max_body_bytes)"
    )


# A client that sends its headers and then stalls mid-body would hold its connection and task
# for ever (the server's keep-alive timeout does not cover a request being read).
BODY_IDLE_SECONDS = 60.0


async def timely(chunks: AsyncIterator[bytes], idle: float | None = None) -> AsyncIterator[bytes]:
    """``chunks`` as they arrive; 408 when none arrives for ``idle`` seconds (default
    :data:`BODY_IDLE_SECONDS`), on a fitted route's body and on one passed through alike."""
    idle = BODY_IDLE_SECONDS if idle is None else idle
    iterator = chunks.__aiter__()
    while True:
        try:
            async with asyncio.timeout(idle):  # no task per chunk, as wait_for makes
                chunk = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except TimeoutError as exc:
            message = f"the request body stalled: no bytes for {idle:g} s"
            raise Refusal(408, message, "request_timeout") from exc
        yield chunk


def parse_json(data: bytes) -> dict[str, Any]:
    """The body's JSON object (400 for anything else)."""
    try:
        body = decode_json(data, "request body", refuse_repeats=True)
    except InvalidRequestError as exc:
        raise Refusal(400, str(exc), "invalid_json") from exc
    if not isinstance(body, dict):
        raise Refusal(400, "request body must be a JSON object", "invalid_request")
    return body


async def read_json(request: Request, gateway: Gateway) -> dict[str, Any]:
    """The request's JSON object, read up to the gateway's body limit."""
    return parse_json(await read_body(request, gateway))


async def on_loop_or_worker(gateway: Gateway, size: int, work: Callable[[], T]) -> T:
    """``work`` on the event loop for a small body, else in a worker thread. Policy mode always
    uses a worker: its assembly may read the store. So does a store over the network: a fit
    reads the session's turn count, which is a round trip to a server that may hang (an SQLite
    file's reads never wait behind a commit: :class:`~ctxbudget.session.store.SQLiteStore`)."""
    if size <= INLINE_BYTES and not gateway.policies and isinstance(gateway.store, SQLiteStore):
        return work()
    return await run_in_threadpool(work)


BACKGROUND_REFUSED = (
    "ctxbudget: background responses are not served (background: true): retrieving, polling or "
    "cancelling one (GET /v1/responses/{id}) is not passed through unless the gateway serves with "
    "--pass-through; send them to the provider directly, or drop background"
)


def first_pass(
    gateway: Gateway, provider: Provider, headers: Mapping[str, str], parcel: list[bytes], progress: Progress
) -> Outbound:
    """Decode the body (``parcel`` holds its bytes, emptied so they are dropped once decoded),
    name its session, read its budgets from ``headers``, fit it, and render what is forwarded
    unless an exact count may change the fit. The gateway's routes and the in-process transport
    (:mod:`.transport`) both decide here."""
    given = headers.get(SESSION_HEADER)
    if given is not None:  # named on the answer even when the body cannot be read
        with contextlib.suppress(InvalidRequestError):  # a bad name is refused below, at its header
            progress.session = named_session(given)
    data = parcel.pop()
    body = parse_json(data)
    held = held_bytes(data)
    del data
    progress.stage = "prepare"
    try:
        progress.session = session_id(headers.get(SESSION_HEADER), provider, body)
    except InvalidRequestError as exc:
        raise Refusal(400, f"ctxbudget: {exc}", "invalid_request") from exc
    if (
        provider.input_format == "responses"
        and body.get("background") is True
        and not gateway.config.pass_through
    ):
        # Refused before it is sent (its session named, as every answer to a body read is): the
        # job would run and bill, and its retrieval and cancel (GET /v1/responses/{id}, ...) are
        # not passed through.
        raise Refusal(400, BACKGROUND_REFUSED, "invalid_request")
    try:
        settings = gateway.settings_for(headers)
    except SettingsError as exc:
        raise Refusal(400, f"ctxbudget: {exc}", "invalid_request") from exc
    prepared = gateway.prepare(provider, body, progress.session, settings)
    progress.prepared = prepared
    outbound = Outbound(body, settings, prepared, given=held)
    return outbound if gateway.depends_on_estimate(provider, prepared) else rendered(provider, outbound)


def rendered(provider: Provider, outbound: Outbound, *, ask_usage: bool = True) -> Outbound:
    """``outbound`` with its bytes as sent upstream (serialised once); an OpenAI stream asks for
    its usage unless ``ask_usage`` is False (an upstream refused the ask)."""
    body = outbound.prepared.body
    forwarded, usage_added = with_stream_usage(provider, body) if ask_usage else (body, False)
    content = sent_bytes(outbound.given, outbound.body, forwarded)
    # the client's bytes are let go once rendered: held through the answer (a stream's minutes)
    # with the bytes sent, a changed body's were twice its size for nothing
    return dataclasses.replace(outbound, content=content, usage_added=usage_added, given=None)


async def outbound(gateway: Gateway, provider: Provider, request: Request, progress: Progress) -> Outbound:
    """Read and prepare the request; when the fit depends on the estimate, refit with the
    upstream's exact count of it (when it gives one)."""
    parcel = [await read_body(request, gateway)]
    progress.size = size = len(parcel[0])
    ready = await on_loop_or_worker(
        gateway, size, lambda: first_pass(gateway, provider, request.headers, parcel, progress)
    )
    if ready.content is not None:
        return ready
    # the provider's count holds the tool-use system prompt, which the proxy count leaves aside
    proxy, prompt = ready.prepared.proxy_before, ready.prepared.overhead_tokens
    exact = await gateway.exact_count(ready.body, forwarded_headers(request.headers.items()), proxy + prompt)
    factor = (exact - prompt) / max(1, proxy) if exact is not None else 0.0
    if not 0 < factor <= MAX_SAFETY_FACTOR:  # the upstream's count is not believable: keep the fit
        return await run_in_threadpool(rendered, provider, ready)
    return await run_in_threadpool(_refit, gateway, provider, ready, progress, factor)


def _refit(
    gateway: Gateway, provider: Provider, ready: Outbound, progress: Progress, factor: float
) -> Outbound:
    """The fit again with the upstream's count of the body (``factor`` over its proxy count)."""
    prepared = gateway.prepare(provider, ready.body, progress.session, ready.settings, factor)
    progress.prepared = prepared
    return rendered(provider, dataclasses.replace(ready, prepared=prepared))
