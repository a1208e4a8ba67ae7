"""Paths the gateway does not fit, passed through to the upstream as they came (``--pass-through``).

An SDK pointed at the gateway calls more than the three APIs it fits: models, embeddings, files,
batches, a background response's retrieval and cancel. With pass-through on, any other ``/v1/``
path goes to an upstream with its method, path and query as sent, the client's headers (their
bytes) less hop-by-hop ones and ctxbudget's own, and its body streamed; the answer comes back
streamed, byte for byte, with the upstream's status and headers (less hop-by-hop ones and those the
gateway's server sets itself). Nothing is fitted, counted, priced or recorded: a cost ceiling does
not reach these paths, which is why pass-through is off by default.

Which upstream: Anthropic's when the client sends ``anthropic-version`` (its API requires it on
every request), else OpenAI's; never by the path, which both APIs share (``/v1/models``,
``/v1/files``) or nest (OpenAI's ``/v1/threads/{id}/messages``). A path with a dot segment
(``/v1/x/../chat/completions``, also percent-encoded) is refused: resolved by the HTTP client, it
would reach a fitted API unfitted, or leave ``/v1/``. An answer cut off upstream is cut off for the
client too (its connection is dropped), never ended as if whole.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import unquote

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse

from .intake import timely
from .providers import ANTHROPIC, OPENAI, RESPONSES, Provider
from .refusals import Refusal
from .service import Gateway
from .settings import HEADER_PREFIX
from .upstream import DROPPED_HEADERS, check_header_count

__all__ = ["HOP_BY_HOP", "pass_through", "passed_to"]

# Headers of one connection, never passed on (RFC 9110 section 7.6.1): the ones the fitted routes
# drop, less those a passed-through request keeps (its body's length, the encodings its client
# asks for: the answer's bytes go back as they come), and the old proxies' own.
HOP_BY_HOP = frozenset(
    name.encode("ascii") for name in DROPPED_HEADERS - {"content-length", "accept-encoding"}
) | {b"proxy-connection"}
_SET_BY_SERVER = frozenset([b"date", b"server"])
# The route's watch for a client that leaves while the upstream call is awaited (given the call,
# and an event set once the request's body was read whole).
Guard = Callable[[Awaitable[httpx.Response], asyncio.Event], Awaitable[httpx.Response]]


def passed_to(request: Request) -> Provider:
    """The API whose upstream a passed-through request goes to (see the module docstring)."""
    return ANTHROPIC if "anthropic-version" in request.headers else OPENAI


async def pass_through(gateway: Gateway, request: Request, unless_gone: Guard) -> StreamingResponse:
    """Send ``request`` to its upstream as it came and stream the answer back; a dot segment is a
    400, a timeout or an unreachable upstream a 504 or 502 (:class:`~.refusals.Refusal`, counted).
    The upstream call is awaited through ``unless_gone`` (the route's), which gives it up once the
    client leaves after sending its body: a client whose SDK timed out left the call running
    upstream until it answered (an embedding or an image billed, then dropped), and its retry
    started a second one."""
    check_header_count(request.headers.raw)
    path = request.scope.get("raw_path") or request.url.path.encode("utf-8")
    if any(segment in (".", "..") for segment in unquote(path.decode("latin-1")).split("/")):
        raise Refusal(
            400, "ctxbudget: a path with a '.' or '..' segment is not passed through", "invalid_request"
        )
    # only a POST is fitted: a GET of the same path (OpenAI's list of stored chat completions) is
    # another API, passed through
    fitted = _fitted_route(unquote(path.decode("latin-1"))) if request.method == "POST" else None
    if fitted is not None:
        raise Refusal(
            400,
            f"ctxbudget: {path.decode('latin-1')!r} names the fitted {fitted} by another spelling and is not "
            f"passed through: send it to {fitted}",
            "invalid_request",
        )
    query = request.url.query
    url = gateway.upstream_at(passed_to(request), path.decode("latin-1"), query)
    headers = _forwarded(request.headers.raw)
    length = request.headers.get("content-length")
    sent = asyncio.Event()
    if length is not None or "transfer-encoding" in request.headers:
        body: bytes | AsyncIterator[bytes] = _body(request, sent)
    else:
        body = b""
        sent.set()
    upstream = await unless_gone(gateway.forward(request.method, url, headers, body), sent)
    response = StreamingResponse(
        _raw(gateway, upstream), status_code=upstream.status_code, background=BackgroundTask(upstream.aclose)
    )
    dropped = HOP_BY_HOP | _SET_BY_SERVER | _named_in_connection(upstream.headers.raw)
    response.raw_headers = [(k, v) for k, v in upstream.headers.raw if k.lower() not in dropped]
    return response


def _named_in_connection(headers: list[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The headers a ``Connection`` header names: this connection's own (RFC 9110 7.6.1)."""
    return frozenset(
        name.strip().lower() for k, v in headers if k.lower() == b"connection" for name in v.split(b",")
    )


# The APIs the gateway fits (its own routes); anything else may be passed through.
FITTED = frozenset(provider.path for provider in (ANTHROPIC, OPENAI, RESPONSES))


def _fitted_route(path: str) -> str | None:
    """The fitted route ``path`` is another spelling of (an empty segment, a trailing slash, a
    ``;parameter``, other letter case, a backslash for a slash, a segment with anything after its
    word: ``completions.json``, ``completions%20``, ``%00``, ``%23x``, ``%3Fa=1``: upstreams and
    front proxies that merge slashes, drop parameters, suffixes or what follows a NUL, or match
    paths in any case serve it as the API itself, unfitted and over any ceiling), else None."""
    segments = [_WORD.match(segment).group() for segment in _SEPARATORS.split(path)]  # type: ignore[union-attr]
    canonical = "/" + "/".join(segment.lower() for segment in segments if segment)
    return canonical if canonical in FITTED else None


_SEPARATORS = re.compile(r"[/\\]")
_WORD = re.compile(r"[A-Za-z0-9_-]*")  # a route's segment as the APIs spell them (count_tokens)


def _forwarded(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The client's headers as their bytes (a header given twice stays twice), less hop-by-hop
    ones and ctxbudget's own; its own encodings asked for, or none (``identity``), so the
    answer's bytes can go back as they come."""
    dropped = HOP_BY_HOP | _named_in_connection(headers)
    prefix = HEADER_PREFIX.encode("ascii")
    out = [(k, v) for k, v in headers if k.lower() not in dropped and not k.lower().startswith(prefix)]
    if not any(k.lower() == b"accept-encoding" for k, _ in out):
        out.append((b"accept-encoding", b"identity"))
    return out


async def _body(request: Request, sent: asyncio.Event) -> AsyncIterator[bytes]:
    """The body as it comes, sent on chunk by chunk (``sent`` set once it was read whole); one that
    stalls is refused (408) as a fitted route's is, not waited on for ever with the upstream's
    connection held."""
    async for chunk in timely(request.stream()):
        if chunk:
            yield chunk
    sent.set()


async def _raw(gateway: Gateway, upstream: httpx.Response) -> AsyncIterator[bytes]:
    """The answer's bytes as they come. Cut off upstream, it is cut off here: the error goes on,
    and the server drops the client's connection, as the upstream's was."""
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    except httpx.HTTPError as exc:
        gateway.note_upstream_error("timeout" if isinstance(exc, httpx.TimeoutException) else "disconnected")
        raise
