"""A local fake of the Anthropic and OpenAI APIs for the gateway tests (loopback only).

It answers Messages, Chat Completions and Responses, streaming and not, and accounts for prompt caching by prefix hashes: the
prefix up to the last ``cache_control`` mark (Anthropic) or the system message or instructions
(OpenAI, when long enough) is read from its "cache" when it saw the same prefix before, else written. Tokens are
counted as characters / 4. Models named ``fault-*`` (500, plain-500, 429, 503, 529, timeout,
disconnect, drop-after-end, badjson, list, nan-usage, deep-json, deep-429, utf8-header,
utf8-header-429) inject faults, ``crowd-N`` waits for N at once; ``poison-usage`` bills a billion input tokens.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ctxbudget.gateway import GatewayConfig, create_app
from ctxbudget.gateway.config import KEEP_ALIVE_SECONDS


def tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


def claude_input(body: dict[str, Any]) -> int:
    """A Messages body's input as the provider counts and bills it: its text, and the tool-use
    system prompt it adds when the body carries tools (346 tokens, 313 when a tool is forced)."""
    forced = isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get("type") in ("any", "tool")
    return tokens(body) + ((313 if forced else 346) if body.get("tools") else 0)


class FakeUpstream:
    def __init__(self) -> None:
        self.cached: set[str] = set()
        self.received: list[dict[str, Any]] = []
        self.raw: list[bytes] = []  # each body's bytes as they arrived
        self.headers: list[dict[str, str]] = []
        self.gateway: Any = None
        self.counted: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.betas: list[list[str]] = []
        self.count_fails = False
        self.arrived = 0  # requests of a ``crowd-N`` model so far
        self.slow_ends: list[bool] = []  # each fault-timeout request's end: whether its caller had left
        self.gathered: asyncio.Event | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/openai/deployments/{name}/chat/completions", self.azure_chat, methods=["POST"]),
                Route("/v1/responses", self.responses, methods=["POST"]),
                Route("/v1/{rest:path}", self.other, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
            ]
        )

    def _cache(self, prefix: Any, minimum: int) -> tuple[int, int]:
        size = tokens(prefix)
        if prefix is None or size < minimum:
            return 0, 0
        key = hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()
        if key in self.cached:
            return size, 0
        self.cached.add(key)
        return 0, size

    @staticmethod
    def _anthropic_prefix(body: dict[str, Any]) -> Any:
        system = body.get("system")
        if isinstance(system, list):
            marks = [i for i, b in enumerate(system) if "cache_control" in b]
            if marks:
                return [{k: v for k, v in b.items() if k != "cache_control"} for b in system[: marks[-1] + 1]]
        return None

    async def _fault(self, model: str, request: Request | None = None) -> Response | None:
        limits = {"retry-after": "7", "request-id": "req_fake_1", "x-ratelimit-remaining-requests": "0"}
        faults: dict[str, Response] = {
            "fault-500": JSONResponse({"error": "boom"}, status_code=500),
            "fault-plain-500": Response("Internal Server Error", status_code=500, media_type="text/plain"),
            "fault-429": JSONResponse(
                {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
                status_code=429,
                headers=limits,
            ),
            "fault-503": JSONResponse({"error": {"message": "unavailable"}}, status_code=503),
            "fault-400": JSONResponse(
                {"error": {"message": "bad request", "type": "invalid_request_error"}}, 400
            ),
            "fault-529": JSONResponse(
                {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}},
                status_code=529,
                headers={"x-should-retry": "true"},
            ),
            "fault-badjson": Response(b'{"id": "msg_1", "content": [', media_type="application/json"),
            "fault-html-200": Response(b"<html>captive portal</html>", media_type="text/html"),
            "fault-redirect": Response(
                b'{"error": "moved"}',
                status_code=307,
                media_type="application/json",
                headers={"location": "https://api.example.com/v1/messages"},
            ),
            "fault-lone-surrogate": Response(  # valid JSON: a reply cut mid-emoji
                b'{"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", '
                b'"text": "cut emoji \\ud83d here"}], "usage": {"input_tokens": 9, "output_tokens": 4}}',
                media_type="application/json",
            ),
            "fault-list": JSONResponse([1, 2, 3]),
            # 200s that answer nothing: an error in either provider's shape, null, an empty object
            "fault-error-200": JSONResponse(
                {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}
            ),
            "fault-openai-error-200": JSONResponse({"error": {"message": "oops", "type": "server_error"}}),
            "fault-null-200": Response(b"null", media_type="application/json"),
            "fault-object-200": Response(b"{}", media_type="application/json"),
            "fault-nan-usage": Response(
                b'{"id": "m", "type": "message", "role": "assistant", "content": [{"type": "text", '
                b'"text": "fine"}], "usage": {"input_tokens": NaN, "output_tokens": "7"}}',
                media_type="application/json",
            ),
        }
        deep = (
            b'{"type": "message", "content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        )  # valid, past Python's reach
        faults["fault-deep-json"] = Response(deep, media_type="application/json")
        faults["fault-deep-429"] = Response(
            deep, status_code=429, media_type="application/json", headers=limits
        )
        if model.startswith("fault-utf8-header"):  # a value in UTF-8, not Latin-1
            answer = faults["fault-429"] if model.endswith("429") else self._message_answer()
            answer.raw_headers.append((b"x-ratelimit-reset-requests", "1分".encode()))
            return answer
        if model == "fault-timeout":
            await asyncio.sleep(3)
            self.slow_ends.append(request is not None and await request.is_disconnected())
        if model == "fault-early-headers":  # headers and a blank at once, the JSON 3 s later
            return StreamingResponse(self._early_headers(), media_type="application/json")
        if model.startswith("crowd-"):
            return await self._crowd(int(model.removeprefix("crowd-")))
        return faults.get(model)

    async def _early_headers(self) -> AsyncIterator[bytes]:
        """A whole answer whose headers come at once (as proxies that keep a long call alive
        send them); ``slow_ends`` says whether its caller left before the body was done."""
        ended = False
        try:
            yield b" "
            await asyncio.sleep(3)
            ended = True
            yield json.dumps(self._message_answer_body()).encode()
        finally:
            self.slow_ends.append(not ended)

    @staticmethod
    def _message_answer_body() -> dict[str, Any]:
        return {
            "id": "msg_early",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "fine"}],
            "usage": {"input_tokens": 9, "output_tokens": 1},
        }

    @staticmethod
    def _message_answer() -> Response:
        return JSONResponse(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": "fine"}],
                "usage": {"input_tokens": 9, "output_tokens": 1},
            }
        )

    async def _crowd(self, size: int) -> Response | None:
        """A ``crowd-N`` request is answered once N of them are in flight at once (503 if they
        never are within 10 s): whatever sits between the clients and here must not queue them."""
        self.gathered = self.gathered or asyncio.Event()
        self.arrived += 1
        if self.arrived >= size:
            self.gathered.set()
        try:
            await asyncio.wait_for(self.gathered.wait(), 10)
        except TimeoutError:
            return JSONResponse(
                {"error": {"message": f"only {self.arrived} of {size} arrived"}}, status_code=503
            )
        return None

    async def _receive(self, request: Request) -> tuple[dict[str, Any], Response | None]:
        """Record the request; the body and the injected fault for its model, if any."""
        self.raw.append(await request.body())
        body = await request.json()
        self.received.append(body)
        self.paths.append(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        self.betas.append(request.headers.getlist("anthropic-beta"))
        self.headers.append(dict(request.headers))
        return body, await self._fault(body.get("model", ""), request)

    async def other(self, request: Request) -> Response:
        """Any other path (what a gateway passes through): models, embeddings, a stored response,
        a gzip answer, else an echo of the request as received (two cookies with it)."""
        body, path = await request.body(), request.scope["raw_path"].decode("latin-1")
        self.paths.append(path + (f"?{request.url.query}" if request.url.query else ""))
        self.headers.append(dict(request.headers))
        if path == "/v1/models":
            model = {"id": "gpt-4o", "object": "model", "created": 0, "owned_by": "fake"}
            return JSONResponse({"object": "list", "data": [model]})
        if path == "/v1/embeddings":
            vector = {"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}
            usage = {"prompt_tokens": 1, "total_tokens": 1}
            return JSONResponse({"object": "list", "data": [vector], "model": "e", "usage": usage})
        if path.startswith("/v1/responses/"):
            usage = {"input_tokens": 1, "output_tokens": 4, "total_tokens": 5}
            return JSONResponse(self._response({"model": "gpt-4o"}, "done in the background", usage))
        if path == "/v1/slow":  # an answer that takes long: given once its caller left (or after 20 s)
            left = False
            for _ in range(200):
                if left := await request.is_disconnected():
                    break
                await asyncio.sleep(0.1)
            self.slow_ends.append(left)
            return JSONResponse({"slow": True})
        if path == "/v1/gzip":
            packed = gzip.compress(b'{"packed": true}')
            return Response(packed, media_type="application/json", headers={"content-encoding": "gzip"})
        if path == "/v1/cut":  # an answer the upstream's connection drops part way

            async def cut() -> AsyncIterator[bytes]:
                yield b'{"partial": '
                raise RuntimeError("dropped mid-answer on purpose")

            return StreamingResponse(cut(), media_type="application/json")
        echo = {"method": request.method, "path": path, "query": request.url.query}
        echo["sha256"] = hashlib.sha256(body).hexdigest()
        response = JSONResponse(echo, status_code=404 if path.endswith("/missing") else 200)
        response.raw_headers += [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2")]
        response.raw_headers.append((b"content-disposition", 'attachment; filename="文件.pdf"'.encode()))
        return response

    async def count_tokens(self, request: Request) -> Response:
        """The provider's counting endpoint: the same count the fake bills (input only)."""
        body = await request.json()
        self.counted.append(body)
        if self.count_fails or "max_tokens" in body:  # the real endpoint refuses max_tokens
            return JSONResponse({"type": "error", "error": {"type": "api_error"}}, status_code=500)
        return JSONResponse({"input_tokens": claude_input(body)})

    async def messages(self, request: Request) -> Response:
        body, fault = await self._receive(request)
        if fault:
            return fault
        read, write = self._cache(self._anthropic_prefix(body), 50)
        usage = {
            # "poison-usage": a broken or hostile answer that bills a billion input tokens
            "input_tokens": 10**9 if body["model"] == "poison-usage" else claude_input(body) - read - write,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
            "output_tokens": 7,
        }
        last = body["messages"][-1]["content"]
        text = "echo: " + (last if isinstance(last, str) else last[-1].get("text", ""))[:40]
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
        return StreamingResponse(self._anthropic_events(body, text, usage), media_type="text/event-stream")

    async def _anthropic_events(
        self, body: dict[str, Any], text: str, usage: dict[str, int]
    ) -> AsyncIterator[bytes]:
        def event(kind: str, data: dict[str, Any]) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

        start_usage = {**usage, "output_tokens": 1}
        yield event(
            "message_start",
            {
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": body["model"],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                }
            },
        )
        yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        for n, piece in enumerate([text[:10], text[10:]]):
            if body["model"] == "fault-disconnect" and n == 1:
                raise RuntimeError("connection dropped on purpose")
            if body["model"] == "fault-stall-stream" and n == 1:  # silent past the gateway's timeout
                await asyncio.sleep(3)
            if body["model"] == "fault-error-event" and n == 1:  # Anthropic's mid-stream error, then the end
                yield event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
                return
            if body["model"] == "fault-error-mid-stream" and n == 1:  # an error, and the rest after it
                yield event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
            if (
                body["model"] == "fault-latin1-chunk" and n == 1
            ):  # data no SDK decodes (not UTF-8), then the rest
                yield b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "caf\xe9"}}\n\n'
            yield event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
            await asyncio.sleep(0.5 if body["model"] == "slow-stream" else 0.01)
        yield event("content_block_stop", {"index": 0})
        yield event(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        yield event("message_stop", {})
        if body["model"] == "fault-drop-after-end":
            raise RuntimeError("connection dropped after the stream's end")

    async def azure_chat(self, request: Request) -> Response:
        """Azure OpenAI's deployment route: the API version is a query parameter it requires."""
        if "api-version" not in request.query_params:
            return JSONResponse({"error": {"message": "Missing api-version", "code": "404"}}, status_code=404)
        return await self.chat(request)

    async def chat(self, request: Request) -> Response:
        body, fault = await self._receive(request)
        if fault:
            return fault
        if body["model"] == "fault-no-stream-options" and "stream_options" in body:  # Azure before 2024-09-01
            refused = {
                "message": "Unrecognized request argument supplied: stream_options",
                "type": "invalid_request_error",
            }
            return JSONResponse({"error": {**refused, "param": None, "code": None}}, status_code=400)
        messages = body["messages"]
        system = messages[0] if messages and messages[0]["role"] in ("system", "developer") else None
        read, _ = self._cache(system, 256)
        usage = {
            "prompt_tokens": tokens(messages),
            "completion_tokens": 5,
            "total_tokens": tokens(messages) + 5,
            "prompt_tokens_details": {"cached_tokens": read},
        }
        text = "echo: " + str(messages[-1].get("content"))[:40]
        if not body.get("stream") or body["model"] == "fault-ignores-stream":
            return JSONResponse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            )
        # a server that labels its stream text/plain: its events still come
        kind = "text/plain" if body["model"] == "fault-plain-events" else "text/event-stream"
        return StreamingResponse(self._openai_chunks(body, text, usage), media_type=kind)

    async def _openai_chunks(
        self, body: dict[str, Any], text: str, usage: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        def chunk(
            delta: dict[str, Any], finish: str | None = None, extra: dict[str, Any] | None = None
        ) -> bytes:
            data = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                if delta is not None
                else [],
            }
            return f"data: {json.dumps({**data, **(extra or {})})}\n\n".encode()

        if body["model"] == "fault-done-only":  # no choice at all: nothing answered
            yield b"data: [DONE]\n\n"
            return
        if body["model"] == "fault-latin1-comment":  # a keep-alive comment no SDK decodes, then the answer
            yield b": keep-alive \xff\n\n"
        yield chunk({"role": "assistant", "content": ""})
        for n, piece in enumerate([text[:10], text[10:]]):
            if body["model"] == "fault-disconnect" and n == 1:
                raise RuntimeError("connection dropped on purpose")
            if body["model"] == "fault-garbled-chunk" and n == 1:  # data the SDK cannot read, then the rest
                yield b"data: {not json\n\n"
            yield chunk({"content": piece})
            await asyncio.sleep(0.01)
        if body["model"] == "fault-no-finish":  # closed mid-answer, cleanly: no finish_reason, no [DONE]
            return
        yield chunk({}, "stop")
        if body["model"] == "fault-error-after-finish":  # finished, then an error, closed cleanly
            yield f"data: {json.dumps({'error': {'message': 'boom', 'type': 'server_error'}})}\n\n".encode()
            return
        if (body.get("stream_options") or {}).get("include_usage"):
            yield f"data: {json.dumps({'id': 'chatcmpl-1', 'object': 'chat.completion.chunk', 'created': 0, 'model': body['model'], 'choices': [], 'usage': usage})}\n\n".encode()
        if body["model"] != "fault-no-done":  # some compatible servers end without it
            yield b"data: [DONE]\n\n"

    async def responses(self, request: Request) -> Response:
        """The Responses API: an echo of the last user text, streamed as Responses events or not."""
        body, fault = await self._receive(request)
        if fault:
            return fault
        given = body["input"]
        items = [{"role": "user", "content": given}] if isinstance(given, str) else given
        read, _ = self._cache(body.get("instructions"), 256)
        users = [i for i in items if i.get("role") == "user"]
        last = users[-1]["content"] if users else ""
        text = "echo: " + (last if isinstance(last, str) else last[-1].get("text", ""))[:40]
        usage = {
            "input_tokens": tokens([body.get("instructions"), items]),
            "input_tokens_details": {"cached_tokens": read},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens([body.get("instructions"), items]) + 5,
        }
        response = self._response(body, text, usage)
        if body["model"] == "fault-failed":  # the API's failed turn: 200, status failed, no output
            error = {"code": "server_error", "message": "The model failed to generate a response."}
            response = {**response, "status": "failed", "error": error, "output": [], "usage": None}
        if not body.get("stream"):
            return JSONResponse(response)
        return StreamingResponse(self._responses_events(body, response), media_type="text/event-stream")

    @staticmethod
    def _response(body: dict[str, Any], text: str, usage: dict[str, Any] | None) -> dict[str, Any]:
        message = {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        return {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "status": "completed" if usage else "in_progress",
            "model": body["model"],
            "output": [message] if usage else [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "previous_response_id": body.get("previous_response_id"),
            "usage": usage,
        }

    async def _responses_events(self, body: dict[str, Any], response: dict[str, Any]) -> AsyncIterator[bytes]:
        sequence = iter(range(100))

        def event(kind: str, data: dict[str, Any]) -> bytes:
            payload = {"type": kind, "sequence_number": next(sequence), **data}
            return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

        yield event("response.created", {"response": self._response(body, "", None)})
        if response["status"] == "failed":
            yield event("response.failed", {"response": response})
            return
        message = response["output"][0]
        text = message["content"][0]["text"]
        where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
        empty = {"type": "output_text", "text": "", "annotations": []}
        yield event("response.output_item.added", {"output_index": 0, "item": {**message, "content": []}})
        yield event("response.content_part.added", {**where, "part": empty})
        for n, piece in enumerate([text[:10], text[10:]]):
            if body["model"] == "fault-disconnect" and n == 1:
                raise RuntimeError("connection dropped on purpose")
            yield event("response.output_text.delta", {**where, "delta": piece})
            await asyncio.sleep(0.01)
        yield event("response.output_text.done", {**where, "text": text})
        yield event("response.content_part.done", {**where, "part": message["content"][0]})
        yield event("response.output_item.done", {"output_index": 0, "item": message})
        yield event("response.completed", {"response": response})
        if body["model"] == "fault-drop-after-end":
            raise RuntimeError("connection dropped after the stream's end")


def unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the client wrote them, before the gateway's cache marks: marks dropped, and a
    content made one marked text block turned back into its string."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
            if len(content) == 1 and set(content[0]) == {"type", "text"} and content[0]["type"] == "text":
                content = content[0]["text"]
        out.append({**message, "content": content})
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """An ASGI app served by uvicorn on a loopback port, in a background thread."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                lifespan="off",
                timeout_keep_alive=KEEP_ALIVE_SECONDS,  # as `ctxbudget serve` serves
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


FAKE_MODELS = Path(__file__).with_name("fake_models.toml")


@contextmanager
def gateway_over_fake(
    store: Path, session_store: Any = None, **options: Any
) -> Iterator[tuple[FakeUpstream, str]]:
    """A fake upstream and a gateway in front of it, both on loopback: (the fake, the gateway's URL);
    ``session_store``, a store object the gateway uses instead of the file ``store``."""
    fake = FakeUpstream()
    options.setdefault("catalog_paths", (str(FAKE_MODELS),))
    with Served(fake.app) as upstream:
        given = {"anthropic_upstream": upstream.url, "openai_upstream": upstream.url, **options}
        config = GatewayConfig(store_path=str(store), **given)
        app = create_app(config, store=session_store)
        fake.gateway = app.state.gateway  # for tests that look at the gateway's state
        with Served(app) as gateway:
            yield fake, gateway.url


def anthropic_client(url: str, key: str = "sk-ant-test-key", **headers: str) -> Any:
    """The official Anthropic SDK pointed at a gateway (no retries: tests see every answer)."""
    import anthropic

    return anthropic.Anthropic(base_url=url, api_key=key, max_retries=0, default_headers=headers)


def openai_client(url: str, key: str = "sk-test-key", **headers: str) -> Any:
    """The official OpenAI SDK pointed at a gateway's /v1."""
    import openai

    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, default_headers=headers)
