"""Paths the gateway does not fit, passed through to the upstream as they came (``--pass-through``).

An SDK pointed at the gateway calls more than the three APIs it fits: models, embeddings, files,
batches, a background response's retrieval and cancel. With pass-through on, any other ``/v1/``
path goes to the API's upstream (by the path, else the client's headers, as for a 404's shape)
with its method, path and query as sent, the client's headers less hop-by-hop ones and
ctxbudget's own, and its body streamed; the answer comes back streamed, byte for byte, with the
upstream's status and headers (less hop-by-hop ones). Nothing is fitted, counted, priced or
recorded: a cost ceiling does not reach these paths, which is why pass-through is off by default.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse

from .providers import Provider
from .service import Gateway
from .upstream import forwarded_headers

__all__ = ["HOP_BY_HOP", "pass_through"]

# Headers of one connection, never passed on (RFC 9110 section 7.6.1).
HOP_BY_HOP = frozenset(
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"]
)


async def pass_through(gateway: Gateway, provider: Provider, request: Request) -> StreamingResponse:
    """Send ``request`` to ``provider``'s upstream as it came and stream the answer back; a
    timeout or an unreachable upstream is a :class:`~.refusals.Refusal` (504, 502), counted."""
    path = request.scope.get("raw_path") or request.url.path.encode("utf-8")
    url = gateway.upstream_base(provider) + path.decode("latin-1")
    query = request.url.query
    headers = forwarded_headers(request.headers.items())
    # The client's own encodings, else none: the answer's bytes go back as they come.
    headers.append(("accept-encoding", request.headers.get("accept-encoding", "identity")))
    length = request.headers.get("content-length")
    if length is not None:  # a body of a stated length goes on with it (not re-chunked)
        headers.append(("content-length", length))
    body = _body(request) if length is not None or "transfer-encoding" in request.headers else b""
    upstream = await gateway.forward(request.method, url + (f"?{query}" if query else ""), headers, body)
    response = StreamingResponse(
        _raw(upstream), status_code=upstream.status_code, background=BackgroundTask(upstream.aclose)
    )
    response.raw_headers = [  # each as given, a header given twice (set-cookie) twice
        (k.encode("latin-1"), v.encode("latin-1"))
        for k, v in upstream.headers.multi_items()
        if k.lower() not in HOP_BY_HOP
    ]
    return response


async def _body(request: Request) -> AsyncIterator[bytes]:
    async for chunk in request.stream():
        if chunk:
            yield chunk


async def _raw(upstream: httpx.Response) -> AsyncIterator[bytes]:
    """The answer's bytes as they come (a connection dropped mid-way ends the stream early)."""
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    except httpx.HTTPError:
        return
