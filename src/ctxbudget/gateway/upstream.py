"""The upstream client: what is sent to the provider and how its faults are told to the client.

Requests go to the configured upstream (never one named by the request) with the client's own
headers, less hop-by-hop ones and ctxbudget's own. A timeout is a 504, an unreachable upstream or
a dropped connection a 502, each counted by kind.

Exact counts for Claude come from the provider's token-counting endpoint, asked only when a fit
decision depends on the estimate (``serve --count-with-upstream``; off by default). No local
tokenizer exists for Claude 3+, so the gateway counts with a proxy encoding times a safety
factor. When a request fits without the factor but not with it, the factor alone decides whether
it is cut: then the gateway asks ``POST /v1/messages/count_tokens`` with the client's own
credentials, remembers the answer by the content's sha256, and refits with the exact figure. Any
failure (an error status, a timeout, an answer without ``input_tokens``) falls back to the estimate.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from http.cookiejar import CookieJar
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .config import GatewayConfig
from .metrics import Metrics
from .providers import Provider
from .refusals import Refusal
from .settings import HEADER_PREFIX

__all__ = [
    "COUNTED_FIELDS",
    "DROPPED_HEADERS",
    "KeepNoCookies",
    "Upstream",
    "UpstreamCounter",
    "check_header_count",
    "forwarded_headers",
    "parsed_url",
    "passed_back",
    "upstream_at",
    "upstream_url",
]

logger = logging.getLogger(__name__)
DROPPED_HEADERS = {
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "accept-encoding",
    # meant for a proxy in front of the gateway (RFC 9110 11.7.2): its credentials never go on to
    # the provider; and the body was read whole, so there is nothing to expect
    "proxy-authorization",
    "proxy-connection",
    "expect",
}
# Upstream headers a client relies on (rate limits, retry advice, request ids), passed back as given.
PASSED_BACK_HEADERS = ("content-type", "request-id", "x-request-id", "retry-after", "x-should-retry")
PASSED_BACK_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "retry-after-")
# The fields of a Messages body that count_tokens reads (it refuses the others, such as max_tokens).
COUNTED_FIELDS = ("model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")


def passed_back(headers: httpx.Headers) -> dict[str, str]:
    """The upstream headers the client gets back, byte for byte: each read from the wire as
    Latin-1, which the answer writes back as the same bytes (a value in UTF-8, such as "1分", was
    decoded as text that the answer could not write: the client got a 502 for an answer given)."""
    out: dict[str, str] = {}
    for key, value in headers.raw:
        name = key.decode("latin-1").lower()
        if name in PASSED_BACK_HEADERS or name.startswith(PASSED_BACK_PREFIXES):
            text = value.decode("latin-1")
            out[name] = f"{out[name]}, {text}" if name in out else text  # a repeated one, as httpx joins it
    return out


# More request headers than this are refused (431) before anything is read or sent. Clients send a
# few dozen (Envoy's default limit is 100); each upstream call reads the client's headers back once
# per header (httpx's cookie handling): 8,000 headers took 2.7 s of the gateway's event loop.
MAX_REQUEST_HEADERS = 256


def check_header_count(raw: Sequence[tuple[bytes, bytes]]) -> None:
    """Raise a 431 :class:`~.refusals.Refusal` when the request has more than
    :data:`MAX_REQUEST_HEADERS` headers."""
    if len(raw) > MAX_REQUEST_HEADERS:
        raise Refusal(
            431,
            f"ctxbudget: the request has {len(raw):,} headers; at most {MAX_REQUEST_HEADERS} are "
            "accepted (nothing was sent)",
            "request_header_fields_too_large",
        )


def forwarded_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """The client's headers, as sent (a header given twice, such as ``anthropic-beta``, stays
    twice), less hop-by-hop ones and ctxbudget's own (never sent upstream); the body the gateway
    sends is JSON of its own making, labelled so whatever label the client's had. A header the
    client's ``Connection`` header names is that connection's own (RFC 9110 7.6.1): not passed on.
    Each is sent as the bytes that came (the server reads them as Latin-1): a value such as
    ``X-Title: Café`` was refused, as text httpx sends only in ASCII."""
    given = list(headers)
    own = {n.strip().lower() for k, v in given if k.lower() == "connection" for n in v.split(",")}
    kept = [
        (k, v)
        for k, v in given
        if k.lower() not in DROPPED_HEADERS
        and k.lower() not in own
        and k.lower() not in ("content-type", "content-encoding")
        and not k.lower().startswith(HEADER_PREFIX)
    ]
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in kept] + [
        (b"content-type", b"application/json")
    ]


def upstream_at(config: GatewayConfig, provider: Provider, path: str, query: str = "") -> str:
    """The upstream URL of ``path`` (``/v1/...``, as the client sent it) at ``provider``'s base.

    Anthropic's base is a host (``ANTHROPIC_BASE_URL`` style, ``/v1`` tolerated): the path
    follows it whole. OpenAI's is ``OPENAI_BASE_URL`` style: a base with a path holds the version
    (``/v1``; Gemini's ``/v1beta/openai``, Azure's ``/openai/deployments/NAME``), and the path
    follows it after its own ``/v1`` (``/v1beta/openai/v1/chat/completions`` was a 404); a bare
    host takes the whole path. A query the base holds (Azure's ``?api-version=...``) comes before
    the request's own ``query`` (it was joined to the path: ``?api-version=.../chat/completions``)."""
    anthropic = provider.name == "anthropic"
    base = urlsplit(config.anthropic_upstream if anthropic else config.openai_upstream)
    root = base.path.rstrip("/")
    if anthropic:
        full = root.removesuffix("/v1") + path
    else:
        full = root + (path.removeprefix("/v1") if root else path)
    joined = "&".join(q for q in (base.query, query) if q)
    return urlunsplit((base.scheme, base.netloc, full, joined, ""))


def upstream_url(config: GatewayConfig, provider: Provider, query: str = "") -> str:
    """The upstream URL of the API ``provider`` fits (with the request's ``query``)."""
    return upstream_at(config, provider, provider.path, query)


class Upstream:
    """The HTTP client to the providers: sends, reads answers, and counts its faults."""

    def __init__(self, client: httpx.AsyncClient, metrics: Metrics, count_url: str) -> None:
        self.client = client
        self.metrics = metrics
        self.counter = UpstreamCounter(client, count_url)

    def note_error(self, kind: str) -> None:
        """Count an upstream fault of ``kind``."""
        self.metrics.upstream_errors.labels(kind).inc()

    async def send(
        self,
        url: str,
        content: bytes | AsyncIterator[bytes],
        headers: list[tuple[bytes, bytes]],
        method: str = "POST",
    ) -> httpx.Response:
        """Send ``content`` (a JSON body, rendered once by the caller, or a stream of bytes) to
        ``url``, the answer streamed; a timeout or an unreachable upstream is a
        :class:`Refusal` (504, 502), counted."""
        request = self.client.build_request(method, parsed_url(url), headers=headers, content=content)
        try:
            return await self.client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            self.note_error("timeout")
            raise Refusal(504, f"upstream timed out: {type(exc).__name__}", "upstream_timeout") from exc
        except httpx.RemoteProtocolError as exc:  # reached: it closed unanswered, or answered no HTTP
            self.note_error("connection")
            message = f"upstream gave no HTTP answer ({str(exc)[:120] or type(exc).__name__})"
            raise Refusal(502, message, "upstream_unreachable") from exc
        except (httpx.ReadError, httpx.WriteError) as exc:
            # reached too: it reset the connection while taking the request or before answering
            # (a close with the request unread resets it; told "unreachable", as a refused connect)
            self.note_error("connection")
            message = f"upstream gave no HTTP answer (it reset the connection: {type(exc).__name__})"
            raise Refusal(502, message, "upstream_unreachable") from exc
        except httpx.HTTPError as exc:
            self.note_error("connection")
            raise Refusal(502, f"upstream unreachable: {type(exc).__name__}", "upstream_unreachable") from exc

    async def read(self, response: httpx.Response) -> bytes:
        """The whole answer, then the connection closed; a timeout (504) or a dropped connection
        (502) while reading is a :class:`Refusal` with the upstream's own headers, counted."""
        try:
            return await response.aread()
        except httpx.HTTPError as exc:
            raise self.unread(response, exc) from exc
        finally:
            await response.aclose()

    def unread(self, response: httpx.Response, exc: httpx.HTTPError) -> Refusal:
        """A failure while reading ``response``'s body: a timeout (504) or a dropped connection
        (502), counted, with the upstream's own headers."""
        if isinstance(exc, httpx.TimeoutException):
            message = f"upstream timed out: {type(exc).__name__}"
            return self.fault(response, 504, "timeout", message, "upstream_timeout")
        message = f"upstream dropped the connection: {type(exc).__name__}"
        return self.fault(response, 502, "disconnected", message, "upstream_disconnected")

    def fault(self, response: httpx.Response, status: int, kind: str, message: str, code: str) -> Refusal:
        """An upstream fault after it answered: counted, and told with the upstream's own headers."""
        self.note_error(kind)
        return Refusal(status, message, code, passed_back(response.headers))


@functools.lru_cache(maxsize=256)
def parsed_url(url: str) -> httpx.URL:
    """``url`` parsed once: the same few upstream URLs come again and again, and httpx parsed a
    string on every request (a request built from one took 107 us, from a parsed URL 59)."""
    return httpx.URL(url)


class KeepNoCookies(CookieJar):
    """The upstream client's cookie jar, which keeps nothing: every client's requests share the
    gateway's client, and a cookie one client's answer set (Cloudflare's ``__cf_bm``) must never
    go with another's. Nothing is read from an answer either (httpx's reading with a policy that
    refuses every domain took 40 us an answer, this 18)."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        """Keep none of the answer's cookies."""

    def set_cookie(self, cookie: Any) -> None:
        """Keep no cookie set by hand either."""


# The exact count is a refinement with the estimate to fall back on: a counting endpoint answers
# in well under a second, so one that has not answered in this long is not waited for any longer
# (the upstream's own timeout, 600 s by default, is sized for a model's answer).
COUNT_TIMEOUT_SECONDS = 5.0


class UpstreamCounter:
    """Exact input-token counts from the upstream, remembered by content (at most ``limit``),
    each asked for at most ``timeout`` seconds (at most the client's own read timeout)."""

    def __init__(
        self, client: httpx.AsyncClient, url: str, limit: int = 4096, timeout: float = COUNT_TIMEOUT_SECONDS
    ) -> None:
        self.client = client
        self.url = url
        self.limit = limit
        self.timeout = min(timeout, client.timeout.read or timeout)
        self.asked = 0
        self.failed = 0
        self._known: OrderedDict[str, int] = OrderedDict()

    async def count(
        self, body: Mapping[str, Any], headers: Sequence[tuple[bytes, bytes]], proxy_tokens: int
    ) -> int | None:
        """The upstream's count of ``body``'s input, or None when it cannot be had. An answer
        far from the proxy count (below half of it, above four times it) is not a count of this
        body: it is neither used nor remembered."""
        payload = {k: body[k] for k in COUNTED_FIELDS if k in body}
        key = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        if key in self._known:
            self._known.move_to_end(key)
            return self._known[key]
        tokens = await self._ask(payload, headers)
        if tokens is None or not proxy_tokens / 2 <= tokens <= proxy_tokens * 4:
            self.failed += 1
            return None
        self._known[key] = tokens
        while len(self._known) > self.limit:
            self._known.popitem(last=False)
        return tokens

    async def _ask(self, payload: Mapping[str, Any], headers: Sequence[tuple[bytes, bytes]]) -> int | None:
        """One call to the counting endpoint: its ``input_tokens``, or None on any failure."""
        self.asked += 1
        try:
            response = await self.client.post(
                self.url, json=payload, headers=list(headers), timeout=self.timeout
            )
            tokens = response.json().get("input_tokens") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError, RecursionError) as exc:
            logger.warning("count_tokens upstream failed (%s); the estimate stands", type(exc).__name__)
            tokens = None
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            return None
        return tokens
